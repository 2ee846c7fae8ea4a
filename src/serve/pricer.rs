//! The endpoint's own thread: Messages requests are read, checked and hashed on the runtime's
//! workers, then priced one after another on this thread, in the order they were handed over.
//!
//! Pricing is sequential by nature (the cache is one state), so some section of every request
//! runs alone. Run under an async lock, that section waited for each next holder to be polled:
//! the lock passes to the first waiter, which may sit behind its worker's other work (sending a
//! response, reading a request) while the lock stays idle, and a worker descheduled by the kernel
//! holds it up altogether. Measured on the serve bench's 18 KB workload with a stand-in 14 µs
//! section, the lock took 19.4 ms where the same work outside any lock took 14.6 ms and this
//! thread 15.5 ms. Here the section runs back to back while requests are waiting, and the workers
//! never wait for each other.
//!
//! The thread holds the core's lock while it drains what is queued; the server's other routes
//! (stats, errors, `count_tokens`) take the same lock, so everything that changes with a request
//! still happens in one order. The thread ends when the server's shared state is dropped.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Weak, mpsc};

use axum::body::Bytes;
use tokio::sync::oneshot;

use super::listen::ConnectionReader;
use super::script::Planned;
use super::{Settings, Shared, http, validate};
use crate::prompt::BlockKeys;
use crate::wire::{ApiError, Betas, ErrorKind, RequestView};

self_cell::self_cell!(
    /// A request body and what its worker read from it: the view borrows the bytes, so the two
    /// travel together from the worker to the pricing thread.
    pub(super) struct ReadBody {
        owner: Bytes,

        #[covariant]
        dependent: Read,
    }
);

/// What a worker read from a body.
// One per request, inside the cell's one allocation: boxing the large variant would add another.
#[allow(clippy::large_enum_variant)]
pub(super) enum Read<'a> {
    /// Not UTF-8: turned away, with its error in the trace (replay must see the rejection).
    NotText(ApiError),
    /// The body as the endpoint will price it, or the API's error for it.
    Text(Result<Checked<'a>, ApiError>),
}

/// A body that parsed and passed the edge's checks.
pub(super) struct Checked<'a> {
    pub(super) view: RequestView<'a>,
    /// Unknown top-level fields (counted; refused under `strict` before this point).
    pub(super) unknown: Vec<String>,
    /// What the reply script decided for it.
    pub(super) planned: Planned,
    pub(super) keys: BlockKeys,
}

impl ReadBody {
    /// Reads `body` as the API's edge does: UTF-8, the one-pass parse and check, the reply
    /// script's plan and the blocks' keys — everything that needs no shared state. With the
    /// connection's `reader`, the body is read from where it parts from the connection's last
    /// one (the same answer).
    pub(super) fn read(body: Bytes, config: &Settings, reader: Option<&ConnectionReader>) -> ReadBody {
        ReadBody::new(body, |body| match http::require_utf8(body) {
            Err(error) => Read::NotText(error),
            Ok(text) => Read::Text(checked(body, text, config, reader)),
        })
    }
}

fn checked<'a>(
    body: &Bytes,
    text: &'a str,
    config: &Settings,
    reader: Option<&ConnectionReader>,
) -> Result<Checked<'a>, ApiError> {
    // A poisoned reader (a panic mid-read) is not used again: the body is read in one pass.
    let mut reader = reader.and_then(|reader| reader.0.lock().ok());
    let (view, unknown, keys) = validate::read_checked(reader.as_deref_mut(), body, text, config.strict)?;
    let planned = config.script.plan(&view);
    Ok(Checked { view, unknown, planned, keys })
}

/// A request waiting to be priced, and where its answer goes.
pub(super) struct Job {
    pub(super) body: ReadBody,
    pub(super) api_key: Option<String>,
    pub(super) betas: Betas,
    /// The answer, and the body back: it is freed on the worker that allocated it (a block
    /// freed on another thread costs the allocator more).
    reply: oneshot::Sender<(http::Answer, ReadBody)>,
}

enum Order {
    Price(Job),
    /// Answered once every order before it has been priced.
    Fence(oneshot::Sender<()>),
}

/// The queue to the pricing thread.
pub(super) struct Pricer {
    orders: mpsc::Sender<Order>,
}

/// The pricing thread's end of the queue, until the thread is started.
pub(super) struct Queue(mpsc::Receiver<Order>);

impl Queue {
    /// Starts the pricing thread for `shared`, which holds this queue's [`Pricer`].
    pub(super) fn start(self, shared: Weak<Shared>) -> std::io::Result<()> {
        let Queue(queue) = self;
        std::thread::Builder::new()
            .name("forkcache-pricer".to_string())
            .spawn(move || run(&shared, &queue))?;
        Ok(())
    }
}

impl Pricer {
    /// The queue, and its end for [`Queue::start`].
    pub(super) fn new() -> (Pricer, Queue) {
        let (orders, queue) = mpsc::channel();
        (Pricer { orders }, Queue(queue))
    }

    /// Prices `body` after every request handed over before it. A request whose client hangs
    /// up meanwhile is still priced, traced and counted: it arrived whole, as a billed request
    /// would have.
    pub(super) async fn price(&self, body: ReadBody, api_key: Option<String>, betas: Betas) -> http::Answer {
        let (reply, answer) = oneshot::channel();
        if self.orders.send(Order::Price(Job { body, api_key, betas, reply })).is_err() {
            return not_priced();
        }
        answer.await.map_or_else(|_| not_priced(), |(answer, _body)| answer)
    }

    /// Waits until everything handed over so far has been priced.
    pub(super) async fn drained(&self) {
        let (done, drained) = oneshot::channel();
        if self.orders.send(Order::Fence(done)).is_ok() {
            let _ = drained.await;
        }
    }
}

/// The answer when the pricing thread failed on a request (a defect: the engine refuses bad
/// input with errors, it does not panic).
fn not_priced() -> http::Answer {
    http::Answer::Error {
        request_id: "req_fc_unpriced".to_string(),
        error: ApiError::new(ErrorKind::Api, "Internal error: the request could not be priced"),
        retry_after_s: None,
    }
}

/// Prices orders as they come, draining whatever is queued under one hold of the lock.
fn run(shared: &Weak<Shared>, queue: &mpsc::Receiver<Order>) {
    while let Ok(first) = queue.recv() {
        let Some(shared) = shared.upgrade() else { return };
        price_queued(&shared, first, queue);
    }
}

fn price_queued(shared: &Arc<Shared>, first: Order, queue: &mpsc::Receiver<Order>) {
    let mut core = shared.core.blocking_lock();
    let mut next = Some(first);
    while let Some(order) = next {
        match order {
            Order::Price(job) => {
                // A panic drops this job's reply (its client gets a 500) and spares the rest.
                let priced =
                    std::panic::catch_unwind(AssertUnwindSafe(|| http::price(shared, &mut core, &job)));
                if let Ok(answer) = priced {
                    let _ = job.reply.send((answer, job.body));
                }
            }
            Order::Fence(done) => {
                let _ = done.send(());
            }
        }
        next = queue.try_recv().ok();
    }
}
