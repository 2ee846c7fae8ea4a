//! Teams (seed 002): the parent leads; teammates run their own conversations on the same
//! clock. A teammate's permission request is "routed through leader's UI": the leader's UI polls
//! (every `poll_ms`), shows a dialog, and the answer returns as the waiting tool's result — no
//! model turn of the leader, nothing in its conversation. An idle notification reaches the
//! leader's mailbox, which the leader reads on its next poll tick once its previous turn is done;
//! what it reads becomes a user turn of its conversation, and its answer (a mailbox message)
//! becomes a new user turn of the teammate when it next wakes, `idle_gap_ms` later.
//!
//! Teammates start from the leader's snapshot (system prompt and tools, byte for byte) plus
//! their own addendum, so each one's first request can read the leader's cached system prefix.
//!
//! Teammates can also message each other (`peer_messages`): a finishing teammate's reply calls
//! `SendMessage`; the message lands in the next teammate's mailbox, read with whatever else
//! arrived when it next wakes, and an idle teammate wakes for it. The sender's turn goes on
//! after the tool's result, then it goes idle.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;

use forkcache_engine::clock::SimTime;
use forkcache_wire::Role;

use super::{Engine, extended, generate_spec};
use crate::ScenarioError;
use crate::agent::{AgentRequest, Block, BlockRef, Mark, Message};
use crate::generate::Generator;
use crate::record::{RequestRole, Who};
use crate::spec::TeamSpec;

struct Teammate {
    name: String,
    next: AgentRequest,
    generator: Generator,
    messages_left: u32,
    asked_permission: bool,
    requests: u32,
    /// The reply whose tool call waits for the leader's permission.
    waiting: Option<Message>,
    /// Direct messages still to send.
    peer_messages_left: u32,
    /// Direct messages received and not read yet.
    inbox: Vec<BlockRef>,
    /// A wake is scheduled: what arrives meanwhile is read then.
    wake_scheduled: bool,
    /// When its last request completes.
    free_at: SimTime,
}

impl Teammate {
    /// Neither running, waiting for a dialog, nor due to wake: idle until a message comes.
    fn idle(&self) -> bool {
        !self.wake_scheduled && self.waiting.is_none()
    }
}

/// What the leader's mailbox holds (permission requests go to its UI, not here).
enum Mail {
    /// Teammate `i` went idle with messages left: the leader sends the next.
    Idle(usize),
    /// Teammate `i` went idle for good: read on the leader's next turn, nothing to answer.
    Done(usize),
}

enum Step {
    Wake(usize),
    Lead,
    /// The leader's UI answers teammate `i`'s permission dialog.
    Dialog(usize),
}

struct Team<'t> {
    spec: &'t TeamSpec,
    mates: Vec<Teammate>,
    steps: BTreeMap<(SimTime, u64), Step>,
    seq: u64,
    /// (arrival, the block the leader reads, what it asks for).
    mailbox: Vec<(SimTime, BlockRef, Mail)>,
    leader_free_at: SimTime,
    ends_at: SimTime,
}

impl Team<'_> {
    fn schedule(&mut self, at: SimTime, step: Step) {
        self.seq += 1;
        self.steps.insert((at, self.seq), step);
        self.ends_at = self.ends_at.max(at);
    }

    /// Wakes teammate `mate` at `at`, unless a wake is already due: what arrived is read then.
    fn schedule_wake(&mut self, at: SimTime, mate: usize) {
        if !self.mates[mate].wake_scheduled {
            self.mates[mate].wake_scheduled = true;
            self.schedule(at, Step::Wake(mate));
        }
    }

    /// A direct message from teammate `from` reaches the next teammate's mailbox at `at`; an
    /// idle recipient wakes for it.
    fn send_peer_message(&mut self, from: usize, at: SimTime) {
        let to = (from + 1) % self.mates.len();
        let text = self.spec.fill(&self.spec.peer_message, &self.mates[from].name);
        let message = Block::text(&text, self.spec.peer_message_tokens);
        let recipient = &mut self.mates[to];
        recipient.inbox.push(message);
        if recipient.idle() {
            let wake = at.max(recipient.free_at);
            self.schedule_wake(wake, to);
        }
    }

    /// The first poll tick at or after `at`.
    fn tick(&self, at: SimTime) -> SimTime {
        SimTime(at.ms().div_ceil(self.spec.poll_ms) * self.spec.poll_ms)
    }

    /// The leader reads at its first poll tick at or after `at`, once its last turn is done.
    fn schedule_lead(&mut self, at: SimTime) {
        let tick = self.tick(at.max(self.leader_free_at));
        self.schedule(tick, Step::Lead);
    }

    /// The leader's UI sees a pending permission request at its first poll tick and answers it
    /// there (the seed: "Leader polls every 500ms, shows UI dialog"); the model is not asked, so
    /// a model turn in progress does not delay it. The user's time at the dialog is not modelled.
    fn schedule_dialog(&mut self, at: SimTime, mate: usize) {
        let tick = self.tick(at);
        self.schedule(tick, Step::Dialog(mate));
    }

    fn post(&mut self, at: SimTime, template: &str, tokens: Option<u64>, mail: Mail) {
        let mate = match mail {
            Mail::Idle(i) | Mail::Done(i) => i,
        };
        let block = Block::text(&self.spec.fill(template, &self.mates[mate].name), tokens);
        let answer_needed = !matches!(mail, Mail::Done(_));
        self.mailbox.push((at, block, mail));
        if answer_needed {
            self.schedule_lead(at);
        }
    }
}

impl Engine<'_> {
    pub(super) fn team(&mut self, spec: &TeamSpec) -> Result<(), ScenarioError> {
        self.drain(Some(self.now))?;
        let names: Vec<String> = (1..=spec.size).map(|i| format!("teammate-{i}")).collect();
        let id = format!("toolu_team{}", self.records.len());
        let input = json!({"team_name": spec.name, "teammates": names});
        let (call, sent) = self.parent_calls(&id, "TeamCreate", input, "TeamCreate")?;
        let created = format!("Team \"{}\" created with {} teammates.", spec.name, spec.size);
        self.parent_gets(call, &id, created, 0, sent.completes_at);
        let mut team = Team {
            spec,
            mates: names.iter().map(|name| self.teammate(spec, name)).collect(),
            steps: BTreeMap::new(),
            seq: 0,
            mailbox: Vec::new(),
            leader_free_at: self.now,
            ends_at: self.now,
        };
        let start = self.now.plus_ms(spec.start_overhead_ms);
        for mate in 0..team.mates.len() {
            team.schedule_wake(start, mate);
        }
        while let Some(((at, _), step)) = team.steps.pop_first() {
            // Other background agents that start first go first: requests stay in start order.
            self.drain(Some(at))?;
            match step {
                Step::Wake(mate) => self.teammate_wakes(&mut team, mate, at)?,
                Step::Lead => self.leader_reads(&mut team, at)?,
                Step::Dialog(mate) => self.dialog_answers(&mut team, mate, at),
            }
        }
        // The last notifications wait for the leader's next turn.
        let unread: Vec<BlockRef> = team.mailbox.drain(..).map(|(_, block, _)| block).collect();
        self.leader_receives(unread);
        self.now = self.now.max(team.ends_at);
        Ok(())
    }

    /// A teammate's first request: the leader's system prompt and tools, its addendum, its task.
    fn teammate(&self, spec: &TeamSpec, name: &str) -> Teammate {
        let snapshot = &self.snapshot;
        let mut system = snapshot.system.to_vec();
        system.push(Block::text(&spec.fill(&spec.addendum, name), spec.addendum_tokens));
        let prompt = Block::text(&spec.fill(&spec.prompt, name), spec.prompt_tokens);
        let mut next = AgentRequest {
            model: snapshot.model.clone(),
            max_tokens: snapshot.max_tokens,
            thinking: snapshot.thinking,
            system: Arc::new(system),
            tools: Arc::clone(&snapshot.tools),
            head: Arc::new(vec![Message::user(vec![prompt])]),
            tail: Vec::new(),
            marks: Vec::new(),
            ttl: self.spec.ttl,
        };
        next.marks.push(Mark::System(next.system.len() as u32 - 1));
        next.mark_last_block();
        let label = format!("{name}@{}", spec.name);
        Teammate {
            name: name.to_string(),
            next,
            generator: Generator::new(&generate_spec(self.spec), self.spec.seed, &label, None),
            messages_left: spec.messages,
            asked_permission: false,
            requests: 0,
            waiting: None,
            peer_messages_left: spec.peer_messages,
            inbox: Vec::new(),
            wake_scheduled: false,
            free_at: self.now,
        }
    }

    /// One request of a teammate, having read what arrived: it asks for a permission (first
    /// wake), messages a teammate, or finishes and goes idle.
    fn teammate_wakes(
        &mut self,
        team: &mut Team<'_>,
        index: usize,
        at: SimTime,
    ) -> Result<(), ScenarioError> {
        let spec = team.spec;
        let peers = team.mates.len() > 1;
        let recipient = team.mates[(index + 1) % team.mates.len()].name.clone();
        let mate = &mut team.mates[index];
        mate.wake_scheduled = false;
        if !mate.inbox.is_empty() {
            let read = std::mem::take(&mut mate.inbox);
            mate.next = extended(&mate.next, vec![Message::user(read)]);
        }
        let asks = spec.permission_request && !mate.asked_permission;
        let messages_peer = !asks && peers && mate.peer_messages_left > 0;
        let reply = if asks {
            mate.asked_permission = true;
            mate.generator.reply(Some(2))
        } else if messages_peer {
            mate.peer_messages_left -= 1;
            send_message_call(&mut mate.generator, &mate.name, &recipient, mate.peer_messages_left, spec)
        } else {
            Message::assistant(vec![mate.generator.text("summary", spec.summary_tokens)])
        };
        mate.requests += 1;
        let who =
            Who::new(RequestRole::Teammate, format!("{}@{} turn {}", mate.name, spec.name, mate.requests));
        let request = mate.next.clone();
        let sent = self.send(&request, who, at, reply.tokens())?;
        team.ends_at = team.ends_at.max(sent.completes_at);
        let mate = &mut team.mates[index];
        mate.free_at = sent.completes_at;
        if asks {
            mate.waiting = Some(reply);
            team.schedule_dialog(sent.completes_at, index);
        } else if messages_peer {
            let results = tool_results(&reply, "Message sent.");
            mate.next = extended(&mate.next, vec![reply, results]);
            let delivered = sent.completes_at.plus_ms(self.spec.agent.tool_ms);
            team.send_peer_message(index, delivered);
            team.schedule_wake(delivered, index);
        } else {
            mate.next = extended(&mate.next, vec![reply]);
            let mail = if mate.messages_left > 0 { Mail::Idle(index) } else { Mail::Done(index) };
            team.post(sent.completes_at, &spec.notification, spec.notification_tokens, mail);
        }
        Ok(())
    }

    /// The leader reads what has arrived, answers in one turn, and the answers go out.
    fn leader_reads(&mut self, team: &mut Team<'_>, at: SimTime) -> Result<(), ScenarioError> {
        if at < team.leader_free_at {
            team.schedule_lead(team.leader_free_at);
            return Ok(());
        }
        let (arrived, later): (Vec<_>, Vec<_>) =
            std::mem::take(&mut team.mailbox).into_iter().partition(|(arrival, _, _)| *arrival <= at);
        team.mailbox = later;
        if arrived.iter().all(|(_, _, mail)| matches!(mail, Mail::Done(_))) {
            team.mailbox.extend(arrived);
            return Ok(());
        }
        let mut mails = Vec::new();
        let blocks = arrived
            .into_iter()
            .map(|(_, block, mail)| {
                mails.push(mail);
                block
            })
            .collect();
        self.now = at;
        self.leader_receives(blocks);
        let request = self.main_request();
        let reply =
            Message::assistant(vec![self.parent_generator.text("lead reply", team.spec.leader_reply_tokens)]);
        let who =
            Who::new(RequestRole::Parent, format!("parent {} (lead reads mail)", self.parent_turns + 1));
        let sent = self.send(&request, who, at, reply.tokens())?;
        self.after_main_request(request, reply.clone(), &sent);
        Arc::make_mut(&mut self.pending).push(reply);
        team.leader_free_at = sent.completes_at;
        team.ends_at = team.ends_at.max(sent.completes_at);
        for mail in mails {
            self.answer(team, mail, sent.completes_at);
        }
        Ok(())
    }

    /// The leader's UI grants teammate `index`'s permission: the waiting tool runs and its
    /// result is the answer; the teammate's next request follows the tool's run.
    fn dialog_answers(&mut self, team: &mut Team<'_>, index: usize, at: SimTime) {
        let spec = team.spec;
        let mate = &mut team.mates[index];
        // A dialog is scheduled only when a request leaves its call waiting.
        let Some(call) = mate.waiting.take() else { return };
        let answer = spec.fill(&spec.permission_answer, &mate.name);
        let results = tool_results(&call, &answer);
        mate.next = extended(&mate.next, vec![call, results]);
        team.schedule_wake(at.plus_ms(self.spec.agent.tool_ms), index);
    }

    fn answer(&mut self, team: &mut Team<'_>, mail: Mail, at: SimTime) {
        let spec = team.spec;
        match mail {
            // A teammate that went idle twice before the leader answered (a peer's message woke
            // it) gets the messages left, not one per notification.
            Mail::Idle(index) if team.mates[index].messages_left > 0 => {
                let mate = &mut team.mates[index];
                mate.messages_left -= 1;
                let message = Block::text(&spec.fill(&spec.message, &mate.name), spec.message_tokens);
                mate.inbox.push(message);
                team.schedule_wake(at.plus_ms(spec.idle_gap_ms), index);
            }
            Mail::Idle(_) | Mail::Done(_) => {}
        }
    }

    /// What the leader reads joins its conversation: the open user message, or a new one after
    /// its last reply.
    fn leader_receives(&mut self, blocks: Vec<BlockRef>) {
        if blocks.is_empty() {
            return;
        }
        let pending = Arc::make_mut(&mut self.pending);
        match pending.last_mut() {
            Some(last) if last.role == Role::User => last.blocks.extend(blocks),
            _ => pending.push(Message::user(blocks)),
        }
    }
}

/// A `tool_result` answering each call of `reply`, all with `content`.
fn tool_results(reply: &Message, content: &str) -> Message {
    let results = reply
        .blocks
        .iter()
        .filter_map(crate::agent::tool_use_id)
        .map(|id| Block::from_value(&json!({"type": "tool_result", "tool_use_id": id, "content": content})))
        .collect();
    Message::user(results)
}

/// A finishing teammate's reply: its summary, then a `SendMessage` call to `recipient` (`left`:
/// the messages it still has to send after this one, which keeps call ids distinct).
fn send_message_call(
    generator: &mut Generator,
    name: &str,
    recipient: &str,
    left: u32,
    spec: &TeamSpec,
) -> Message {
    let id = format!("toolu_dm_{name}_{left}");
    let input = json!({"to": recipient, "message": spec.fill(&spec.peer_message, name)});
    Message::assistant(vec![
        generator.text("summary", spec.summary_tokens),
        Block::from_value(&json!({"type": "tool_use", "id": id, "name": "SendMessage", "input": input})),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::GenerateSpec;
    use forkcache_engine::prompt::Ttl;

    fn mate(name: &str) -> Teammate {
        let next = AgentRequest {
            model: "claude-sonnet-4-6".into(),
            max_tokens: 1_000,
            thinking: None,
            system: Arc::new(Vec::new()),
            tools: Arc::new(Vec::new()),
            head: Arc::new(Vec::new()),
            tail: Vec::new(),
            marks: Vec::new(),
            ttl: Ttl::FiveMinutes,
        };
        Teammate {
            name: name.into(),
            next,
            generator: Generator::new(&GenerateSpec::default(), 0, name, None),
            messages_left: 0,
            asked_permission: true,
            requests: 1,
            waiting: None,
            peer_messages_left: 0,
            inbox: Vec::new(),
            wake_scheduled: false,
            free_at: SimTime(2_000),
        }
    }

    fn team(spec: &TeamSpec) -> Team<'_> {
        Team {
            spec,
            mates: vec![mate("teammate-1"), mate("teammate-2"), mate("teammate-3")],
            steps: BTreeMap::new(),
            seq: 0,
            mailbox: Vec::new(),
            leader_free_at: SimTime(0),
            ends_at: SimTime(0),
        }
    }

    #[test]
    fn a_message_wakes_an_idle_teammate_once_and_waits_for_a_busy_one() {
        let spec = TeamSpec::default();
        let mut team = team(&spec);
        // teammate-1 messages teammate-2, idle once its request completes at 2,000 ms: the
        // message lands at 1,500 ms, and it wakes as soon as it is free, at 2,000 ms.
        team.send_peer_message(0, SimTime(1_500));
        assert_eq!(team.steps.keys().map(|(at, _)| at.ms()).collect::<Vec<_>>(), vec![2_000]);
        assert!(matches!(team.steps.values().next(), Some(Step::Wake(1))));
        // A second message before that wake joins the same wake.
        team.send_peer_message(0, SimTime(1_800));
        assert_eq!(team.steps.len(), 1);
        assert_eq!(team.mates[1].inbox.len(), 2);
        assert!(team.mates[1].inbox[0].tokens > 0);
        // teammate-3 waits for the leader's permission dialog: the message waits for its wake.
        team.mates[2].waiting = Some(Message::assistant(Vec::new()));
        team.send_peer_message(1, SimTime(3_000));
        assert_eq!(team.steps.len(), 1);
        assert_eq!(team.mates[2].inbox.len(), 1);
    }
}
