//! The API's own checks (issue 28, "a mock as strict as the API"), each rule through the HTTP
//! server and through `replay`, which share them: the API's status and error type, a message
//! naming the field; and `--lenient` (`EndpointConfig::lenient`) prices the same body.
//! The expected texts are the ones `wire::check` documents (the API's where known).

use forkcache_engine::billing::PriceTable;
use forkcache_engine::endpoint::EndpointConfig;
use forkcache_ingest::replay::{ReplayConfig, replay};
use forkcache_net::serve::ServeConfig;

use crate::serve_harness::{Running, client, post};

/// One rule: a body that breaks it, and what the API answers.
struct Rule {
    name: &'static str,
    path: &'static str,
    body: String,
    status: u16,
    error_type: &'static str,
    /// The start of the message (it names the field).
    message: &'static str,
}

impl Rule {
    /// Whether `--lenient` prices the body: all but `cache_control: {}`, which the engine's own
    /// marker validation refused before the API's checks were added, lenient or not.
    fn lenient_prices(&self) -> bool {
        !self.body.contains(r#""cache_control":{}"#)
    }
}

const HI: &str = r#"[{"role":"user","content":"hi"}]"#;

fn body(extra: &str, messages: &str) -> String {
    format!(r#"{{"model":"claude-sonnet-4-6","max_tokens":4096{extra},"messages":{messages}}}"#)
}

fn invalid(name: &'static str, body: String, message: &'static str) -> Rule {
    Rule { name, path: "/v1/messages", body, status: 400, error_type: "invalid_request_error", message }
}

fn rules() -> Vec<Rule> {
    let call =
        r#"{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01A","name":"Read","input":{}}]}"#;
    vec![
        invalid(
            "tool_use without tool_result",
            body("", &format!(r#"[{{"role":"user","content":"go"}},{call},{{"role":"user","content":"and?"}}]"#)),
            "messages.1.content.0: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01A.",
        ),
        invalid(
            "tool_result without tool_use",
            body("", r#"[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01B","content":"x"}]}]"#),
            "messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_01B.",
        ),
        invalid("temperature above 1", body(r#","temperature":2"#, HI), "temperature: Input should be less than or equal to 1"),
        invalid("top_p below 0", body(r#","top_p":-1"#, HI), "top_p: Input should be greater than or equal to 0"),
        invalid(
            "thinking budget below 1024",
            body(r#","thinking":{"type":"enabled","budget_tokens":512}"#, HI),
            "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
        ),
        invalid(
            "thinking budget not below max_tokens",
            body(r#","thinking":{"type":"enabled","budget_tokens":4096}"#, HI),
            "`max_tokens` must be greater than `thinking.budget_tokens`.",
        ),
        invalid(
            "unknown block type",
            body("", r#"[{"role":"user","content":[{"type":"hologram","text":"x"}]}]"#),
            "messages.0.content.0: Input tag 'hologram' found using 'type' does not match any of the expected tags:",
        ),
        invalid("tool without a name", body(r#","tools":[{"input_schema":{"type":"object"}}]"#, HI), "tools.0.name: Field required"),
        invalid(
            "duplicate tool names",
            body(r#","tools":[{"name":"a","input_schema":{"type":"object"}},{"name":"a","input_schema":{"type":"object"}}]"#, HI),
            "tools: Tool names must be unique.",
        ),
        invalid(
            "unknown tool_choice",
            body(r#","tool_choice":{"type":"maybe"}"#, HI),
            "tool_choice: Input tag 'maybe' found using 'type'",
        ),
        invalid(
            "empty cache_control",
            body(r#","cache_control":{}"#, HI),
            "cache_control.type: Input should be 'ephemeral'",
        ),
        invalid("non-string user_id", body(r#","metadata":{"user_id":42}"#, HI), "metadata.user_id: Input should be a valid string"),
        invalid("unknown service_tier", body(r#","service_tier":"gold""#, HI), "service_tier: Input should be 'auto' or 'standard_only'"),
        invalid(
            "invalid base64 image",
            body("", r#"[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"%%%"}}]}]"#),
            "messages.0.content.0.source.data: invalid base64 data",
        ),
        invalid(
            "Opus 4.8 non-default temperature",
            r#"{"model":"claude-opus-4-8","max_tokens":100,"temperature":0.2,"messages":[{"role":"user","content":"hi"}]}"#.to_string(),
            "temperature: only the default value is supported for claude-opus-4-8",
        ),
    ]
}

fn count_tokens_rules() -> Vec<Rule> {
    vec![
        Rule {
            name: "count_tokens unknown model",
            path: "/v1/messages/count_tokens",
            body: r#"{"model":"claude-nonesuch-9","messages":[{"role":"user","content":"hi"}]}"#.to_string(),
            status: 404,
            error_type: "not_found_error",
            message: "model: claude-nonesuch-9",
        },
        Rule {
            name: "count_tokens empty messages",
            path: "/v1/messages/count_tokens",
            body: r#"{"model":"claude-sonnet-4-6","messages":[]}"#.to_string(),
            status: 400,
            error_type: "invalid_request_error",
            message: "messages: at least one message is required",
        },
    ]
}

#[test]
fn the_server_refuses_each_rule_as_the_api_does_and_lenient_prices_it() {
    let strict = Running::start(ServeConfig::default(), EndpointConfig::default());
    let lenient =
        Running::start(ServeConfig::default(), EndpointConfig { lenient: true, ..EndpointConfig::default() });
    let agent = client();
    for rule in rules().iter().chain(&count_tokens_rules()) {
        let answer = post(&agent, &strict.url(rule.path), None, rule.body.as_bytes());
        assert_eq!(answer.status, rule.status, "{}: {}", rule.name, answer.body);
        let (kind, message) = answer.error();
        assert_eq!(kind, rule.error_type, "{}", rule.name);
        assert!(message.starts_with(rule.message), "{}: {message}", rule.name);
        let accepted = post(&agent, &lenient.url(rule.path), None, rule.body.as_bytes());
        let expected = if rule.lenient_prices() { 200 } else { rule.status };
        assert_eq!(accepted.status, expected, "{} (lenient): {}", rule.name, accepted.body);
    }
    strict.stop();
    lenient.stop();
}

/// The server remembers the blocks that passed the rules (a client resends its tools, system
/// prompt and conversation): every rule's answer is the same when each body comes a second time,
/// after every other body's blocks were seen.
#[test]
fn the_server_answers_each_rule_the_same_once_it_has_seen_the_blocks() {
    let strict = Running::start(ServeConfig::default(), EndpointConfig::default());
    let agent = client();
    let answers = || -> Vec<(u16, String, String)> {
        rules()
            .iter()
            .map(|rule| {
                let answer = post(&agent, &strict.url(rule.path), None, rule.body.as_bytes());
                let (kind, message) = answer.error();
                (answer.status, kind, message)
            })
            .collect()
    };
    let first = answers();
    assert_eq!(answers(), first);
    // A valid request whose blocks a refused one shares: still priced.
    let valid = post(&agent, &strict.url("/v1/messages"), None, body("", HI).as_bytes());
    assert_eq!(valid.status, 200, "{}", valid.body);
    strict.stop();
}

#[test]
fn replay_refuses_each_rule_and_lenient_replay_prices_it() {
    let rules = rules();
    let trace: String = rules
        .iter()
        .enumerate()
        .map(|(k, rule)| format!("{{\"at_ms\":{},\"body\":{}}}\n", k * 1000, rule.body))
        .collect();
    let strict = replay(&ReplayConfig::default(), PriceTable::builtin(), &trace).unwrap();
    assert_eq!(strict.records.len(), rules.len());
    for (rule, record) in rules.iter().zip(&strict.records) {
        let error = record.result.as_ref().expect_err(rule.name);
        assert_eq!(error.kind.status(), rule.status, "{}", rule.name);
        assert!(error.message.starts_with(rule.message), "{}: {}", rule.name, error.message);
    }
    let config = ReplayConfig {
        endpoint: EndpointConfig { lenient: true, ..EndpointConfig::default() },
        ..ReplayConfig::default()
    };
    let lenient = replay(&config, PriceTable::builtin(), &trace).unwrap();
    for (rule, record) in rules.iter().zip(&lenient.records) {
        assert_eq!(
            record.result.is_ok(),
            rule.lenient_prices(),
            "{} (lenient): {:?}",
            rule.name,
            record.result
        );
    }
}
