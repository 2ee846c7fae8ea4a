//! Pricing: Messages requests are read, checked and hashed on the runtime's workers, then priced
//! one after another, in the order they were handed over.
//!
//! Pricing is sequential by nature (the cache is one state), so some section of every request
//! runs alone. Run under an async lock, that section waited for each next holder to be polled:
//! the lock passes to the first waiter, which may sit behind its worker's other work (sending a
//! response, reading a request) while the lock stays idle. Measured on the serve bench's 18 KB
//! workload with a stand-in 14 µs section, the lock took 19.4 ms where the same work outside any
//! lock took 14.6 ms and a thread fed by a channel 15.5 ms. A thread of its own, though, has to
//! be woken for every request that finds it asleep, and has to wake the worker back: with 4
//! connections that was 1.3 more futex calls and one more context switch per request, and a
//! quarter more CPU per request than with 16.
//!
//! So requests are handed over at a desk (flat combining). A worker that finds nobody pricing
//! prices its own request there and then, and whatever is handed over meanwhile, under one hold
//! of the core's lock: with few connections a request is priced on the worker that read it, and
//! no thread is woken. A worker that finds someone pricing leaves its request and serves its
//! other connections until the answer comes. A worker's turn is at most [`TURN`] requests, so
//! its own connections are not held up for long; what is still waiting then goes to the
//! endpoint's own thread, which prices until the desk is empty.
//!
//! Whoever prices holds the core's lock; the server's other routes (stats, errors,
//! `count_tokens`) take the same lock, so everything that changes with a request still happens
//! in one order. The thread ends when the server's shared state is dropped.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::{Mutex, MutexGuard, PoisonError, Weak, mpsc};

use tokio::sync::oneshot;

use forkcache_wire::{ApiError, Betas, ErrorKind};

use super::answer::{self, Answer, Request};
use super::read::ReadBody;
use super::{Core, Shared};
use crate::edge::listen::Connection;

/// A request waiting to be priced, and where its answer goes.
pub(super) struct Job {
    pub(super) request: Request,
    /// The answer, and the body back: it is freed on the worker that allocated it (a block
    /// freed on another thread costs the allocator more).
    reply: oneshot::Sender<(Answer, ReadBody)>,
}

enum Order {
    Price(Job),
    /// Answered once every order before it has been priced.
    Fence(oneshot::Sender<()>),
}

/// The most requests a worker prices in one turn: about 16 × 8 µs of its time on the serve
/// bench's 18 KB requests, kept from its own connections. Past it the pricing thread takes over.
const TURN: usize = 16;

/// Prices `body` after every request handed over before it. A request whose client hangs up
/// meanwhile is still priced, traced and counted: it arrived whole, as a billed request would
/// have.
pub(super) async fn price(
    shared: &Shared,
    body: ReadBody,
    sender: (Option<String>, Betas),
    connection: Option<Connection>,
) -> Answer {
    let (api_key, betas) = sender;
    let (reply, answer) = oneshot::channel();
    let request = Request { body, api_key, betas, connection };
    shared.pricer.hand_over(shared, Order::Price(Job { request, reply }));
    answer.await.map_or_else(|_| not_priced(), |(answer, _body)| answer)
}

/// Waits until everything handed over so far has been priced.
pub(super) async fn drained(shared: &Shared) {
    let (done, drained) = oneshot::channel();
    shared.pricer.hand_over(shared, Order::Fence(done));
    let _ = drained.await;
}

/// Where requests are handed over to be priced (`shared.pricer`: [`price`] and [`drained`]).
pub(super) struct Pricer {
    desk: Desk<Order>,
    /// Wakes the pricing thread to finish a worker's turn.
    take_over: mpsc::Sender<()>,
}

/// The pricing thread's wake-ups, until the thread is started.
pub(super) struct TakeOvers(mpsc::Receiver<()>);

impl TakeOvers {
    /// Starts the pricing thread for `shared`, which holds this end's [`Pricer`].
    pub(super) fn start(self, shared: Weak<Shared>) -> std::io::Result<()> {
        let TakeOvers(take_overs) = self;
        std::thread::Builder::new()
            .name("forkcache-pricer".to_string())
            .spawn(move || run(&shared, &take_overs))?;
        Ok(())
    }
}

impl Pricer {
    /// The desk, and the pricing thread's end for [`TakeOvers::start`].
    pub(super) fn new() -> (Pricer, TakeOvers) {
        let (take_over, take_overs) = mpsc::channel();
        (Pricer { desk: Desk::default(), take_over }, TakeOvers(take_overs))
    }

    /// Leaves `order` at the desk, and takes a turn pricing if nobody is pricing. Nothing here
    /// waits for another task, so a caller dropped at its next await (its client gone) cannot
    /// leave orders unpriced.
    fn hand_over(&self, shared: &Shared, order: Order) {
        if !self.desk.leave(order) {
            return;
        }
        let mut core = shared.lock();
        let finished = fill_turn(&self.desk, TURN, |order| fill(shared, &mut core, order));
        drop(core);
        // Orders are left and the desk is still marked as taken: the thread finishes the turn.
        if !finished && self.take_over.send(()).is_err() {
            // No thread (the server is being dropped): finish here.
            self.price_until_empty(shared);
        }
    }

    fn price_until_empty(&self, shared: &Shared) {
        let mut core = shared.lock();
        fill_turn(&self.desk, usize::MAX, |order| fill(shared, &mut core, order));
    }
}

/// Orders waiting, and whether someone is filling them (flat combining): whoever leaves an order
/// at a free desk fills it, and every order left meanwhile, before the desk is free again.
struct Desk<T> {
    state: Mutex<DeskState<T>>,
}

struct DeskState<T> {
    orders: VecDeque<T>,
    /// Someone is filling orders, and fills every order here before it lets go.
    taken: bool,
}

impl<T> Default for Desk<T> {
    fn default() -> Desk<T> {
        Desk { state: Mutex::new(DeskState { orders: VecDeque::new(), taken: false }) }
    }
}

impl<T> Desk<T> {
    /// Leaves `order`. True when the desk was free: the caller has taken it and must fill
    /// orders ([`fill_turn`]) until it is free again or hand them on.
    fn leave(&self, order: T) -> bool {
        let mut state = self.state();
        state.orders.push_back(order);
        !std::mem::replace(&mut state.taken, true)
    }

    /// The next order for whoever has the desk, or `None` with the desk made free. One step
    /// under the lock: an order left meanwhile is either taken here or makes its sender the
    /// next to fill.
    fn next(&self) -> Option<T> {
        let mut state = self.state();
        let order = state.orders.pop_front();
        state.taken = order.is_some();
        order
    }

    fn state(&self) -> MutexGuard<'_, DeskState<T>> {
        // A queue and a flag, changed in single steps: a panic elsewhere leaves them whole.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Fills up to `turn` orders from a desk the caller has taken. True when the desk is free
/// again; false when orders are left and the desk is still taken, for someone to go on.
fn fill_turn<T>(desk: &Desk<T>, turn: usize, mut fill: impl FnMut(T)) -> bool {
    for _ in 0..turn {
        match desk.next() {
            Some(order) => fill(order),
            None => return true,
        }
    }
    false
}

/// The answer when pricing failed on a request (a defect: the engine refuses bad input with
/// errors, it does not panic).
fn not_priced() -> Answer {
    Answer::Error {
        request_id: "req_fc_unpriced".to_string(),
        error: ApiError::new(ErrorKind::Api, "Internal error: the request could not be priced"),
        retry_after_s: None,
    }
}

/// Finishes the turns workers hand over, until the server's shared state is dropped.
fn run(shared: &Weak<Shared>, take_overs: &mpsc::Receiver<()>) {
    while let Ok(()) = take_overs.recv() {
        let Some(shared) = shared.upgrade() else { return };
        shared.pricer.price_until_empty(&shared);
    }
}

fn fill(shared: &Shared, core: &mut Core, order: Order) {
    fill_with(order, |request| answer::price(shared, core, request));
}

/// Fills `order`, a request with `price`. A panic while pricing drops that job's reply (its
/// client gets [`not_priced`], a 500) and spares the rest of the turn.
fn fill_with(order: Order, price: impl FnOnce(&Request) -> Answer) {
    match order {
        Order::Price(job) => {
            let priced = std::panic::catch_unwind(AssertUnwindSafe(|| price(&job.request)));
            if let Ok(answer) = priced {
                let _ = job.reply.send((answer, job.request.body));
            }
        }
        Order::Fence(done) => {
            let _ = done.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use axum::body::Bytes;

    use super::super::read::Read;
    use super::*;

    /// Senders leave orders at one desk from four threads, in turns of 3, with a thread taking
    /// over what a turn leaves: every order is filled exactly once, by one filler at a time, and
    /// each sender's orders in the order it left them; the desk is free at the end.
    #[test]
    fn every_order_is_filled_once_by_one_filler_at_a_time_in_order() {
        const SENDERS: u64 = 4;
        const ORDERS: u64 = 20_000;
        let desk = &Desk::default();
        let filling = &AtomicBool::new(false);
        let filled = &Mutex::new(Vec::new());
        let fill = move |order: (u64, u64)| {
            assert!(!filling.swap(true, Ordering::SeqCst), "two fillers at once");
            filled.lock().unwrap().push(order);
            filling.store(false, Ordering::SeqCst);
        };
        let (take_over, take_overs) = mpsc::channel::<()>();
        std::thread::scope(|scope| {
            let taker = scope.spawn(move || {
                for () in take_overs {
                    fill_turn(desk, usize::MAX, fill);
                }
            });
            let senders: Vec<_> = (0..SENDERS)
                .map(|sender| {
                    let take_over = take_over.clone();
                    scope.spawn(move || {
                        for n in 0..ORDERS {
                            if desk.leave((sender, n)) && !fill_turn(desk, 3, fill) {
                                take_over.send(()).unwrap();
                            }
                        }
                    })
                })
                .collect();
            for sender in senders {
                sender.join().unwrap();
            }
            drop(take_over);
            taker.join().unwrap();
        });
        let filled = std::mem::take(&mut *filled.lock().unwrap());
        assert_eq!(filled.len() as u64, SENDERS * ORDERS, "every order filled, once");
        for sender in 0..SENDERS {
            let theirs: Vec<u64> = filled.iter().filter(|(s, _)| *s == sender).map(|(_, n)| *n).collect();
            assert!(theirs.iter().copied().eq(0..ORDERS), "sender {sender}'s orders, in the order left");
        }
        assert!(desk.leave((0, 0)), "the desk is free at the end");
    }

    /// A turn stops at its limit with the desk still taken, so nobody else starts filling while
    /// the orders left wait for whoever goes on.
    #[test]
    fn a_turn_at_its_limit_keeps_the_desk_taken() {
        let desk = Desk::default();
        assert!(desk.leave(1), "a free desk is taken by the first order's sender");
        assert!(!desk.leave(2) && !desk.leave(3), "orders left at a taken desk wait");
        let mut filled = Vec::new();
        assert!(!fill_turn(&desk, 2, |order| filled.push(order)), "one order is left");
        assert!(!desk.leave(4), "the desk is still taken");
        assert!(fill_turn(&desk, usize::MAX, |order| filled.push(order)));
        assert_eq!(filled, [1, 2, 3, 4]);
        assert!(desk.leave(5), "free again");
    }

    /// A job whose body is one byte, `n`, and the receiving end of its reply.
    fn job(n: u8) -> (Job, oneshot::Receiver<(Answer, ReadBody)>) {
        let (reply, answer) = oneshot::channel();
        let body = ReadBody::new(Bytes::from(vec![n]), |_| Read::NotText(ApiError::invalid("not read")));
        let request = Request { body, api_key: None, betas: Betas::default(), connection: None };
        (Job { request, reply }, answer)
    }

    /// A fault planted in pricing the first of three orders of a turn: that job's reply is
    /// dropped (so its client gets `not_priced`), the two after it are priced in the same turn,
    /// and the desk is free at the end.
    #[test]
    fn a_panic_while_pricing_drops_that_reply_alone() {
        let desk = Desk::default();
        let mut answers = Vec::new();
        for n in 0..3 {
            let (job, answer) = job(n);
            let first = desk.leave(Order::Price(job));
            assert_eq!(first, n == 0, "the first order takes the desk");
            answers.push(answer);
        }
        let priced = |request: &Request| {
            let n = request.body.borrow_owner()[0];
            assert_ne!(n, 0, "a fault planted in pricing");
            let request_id = format!("req_{n}");
            Answer::Error { request_id, error: ApiError::invalid("priced"), retry_after_s: None }
        };
        assert!(fill_turn(&desk, TURN, |order| fill_with(order, priced)), "the turn ends the desk's orders");
        assert!(matches!(answers[0].try_recv(), Err(oneshot::error::TryRecvError::Closed)));
        for (n, answer) in answers.iter_mut().enumerate().skip(1) {
            let (answer, _body) = answer.try_recv().expect("priced after the panic");
            let Answer::Error { request_id, .. } = answer else { panic!("the answer given") };
            assert_eq!(request_id, format!("req_{n}"));
        }
        assert!(desk.leave(Order::Fence(oneshot::channel().0)), "the desk is free again");
        let Answer::Error { error, .. } = not_priced() else { panic!("an error") };
        assert_eq!((error.kind, error.kind.status()), (ErrorKind::Api, 500));
    }
}
