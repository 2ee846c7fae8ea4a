//! Accepting connections, with the limits a public server needs: at most `max_connections` open
//! at once (a semaphore taken before each accept, so an overload waits in the kernel's backlog
//! instead of exhausting file descriptors), headers within `header_timeout` (hyper's header-read
//! timer on the connection's [`HeaderClock`], which also bounds the wait for the next request on
//! a kept-alive connection), and no connection left without progress in either direction for
//! `idle_timeout` (a client that stops reading its response, or goes silent, is closed). The
//! body's own deadline is in `http`. What hyper refuses before any handler runs still gets the
//! API's error shape ([`super::refusals`]).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::{Instant, Sleep};

use forkcache_engine::prompt::RenderSketch;
use forkcache_ingest::trace::{BodyBudget, BodyReader};

use super::refusals::ShapedRefusals;

/// Connection limits (see [`super::ServeConfig`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
}

/// Serves `router` on `listener` until `stopping` completes, then waits for open connections to
/// finish their in-flight requests (the caller bounds that wait). With `kept`, each connection
/// keeps its last request ([`Connection`]) within that budget.
pub(super) async fn serve(
    listener: TcpListener,
    router: axum::Router,
    limits: Limits,
    kept: Option<BodyBudget>,
    stopping: impl Future<Output = ()>,
) {
    let open = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    tokio::pin!(stopping);
    loop {
        let accepted = tokio::select! {
            () = &mut stopping => break,
            accepted = accept(&listener, &open) => accepted,
        };
        let Some((stream, permit)) = accepted else { continue };
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(ShapedRefusals::new(IdleTimeout::new(stream, limits.idle_timeout)));
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(HeaderClock::new())
            .header_read_timeout(limits.header_timeout)
            .serve_connection(io, with_connection(router.clone(), kept.clone()));
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            // A connection's end (a reset, a timeout) concerns that client alone.
            let _ = connection.await;
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// A connection's own [`BodyReader`] and [`RenderSketch`], which each of its requests carries
/// as an extension: the Messages route reads a body from where it parts from the connection's
/// last one, and the endpoint renders its prompt from there (the other routes leave them alone).
/// HTTP/1 serves one request of a connection at a time, so neither lock is ever contended.
#[derive(Clone)]
pub(crate) struct Connection(pub(crate) Arc<LastRequest>);

/// What one connection keeps of its last request, within the server's [`BodyBudget`].
pub(crate) struct LastRequest {
    pub(crate) reader: Mutex<BodyReader>,
    pub(crate) sketch: Mutex<KeptSketch>,
}

impl Connection {
    fn new(budget: BodyBudget) -> Connection {
        let sketch = KeptSketch { sketch: RenderSketch::default(), charged: 0, budget: budget.clone() };
        let reader = Mutex::new(BodyReader::new(budget));
        Connection(Arc::new(LastRequest { reader, sketch: Mutex::new(sketch) }))
    }
}

/// A connection's [`RenderSketch`], counted against the budget its bodies are: past the budget
/// the sketch is dropped, and the connection's next prompt is rendered whole.
pub(crate) struct KeptSketch {
    sketch: RenderSketch,
    /// Bytes of the budget it holds.
    charged: usize,
    budget: BodyBudget,
}

impl KeptSketch {
    /// `render` with the sketch, which is then counted at its new size against the budget, or
    /// forgotten when there is no room.
    pub(crate) fn render_with<R>(&mut self, render: impl FnOnce(&mut RenderSketch) -> R) -> R {
        let rendered = render(&mut self.sketch);
        let size = self.sketch.heap_bytes();
        if size != self.charged {
            self.budget.give_back(std::mem::take(&mut self.charged));
            if self.budget.take(size) {
                self.charged = size;
            } else {
                self.sketch.clear();
            }
        }
        rendered
    }
}

impl Drop for KeptSketch {
    fn drop(&mut self) {
        self.budget.give_back(self.charged);
    }
}

/// `router` for one connection: with a `budget`, every request carries the [`Connection`].
fn with_connection(
    router: axum::Router,
    budget: Option<BodyBudget>,
) -> impl hyper::service::Service<
    hyper::Request<hyper::body::Incoming>,
    Response = axum::response::Response,
    Error = std::convert::Infallible,
    Future = impl Future<Output = Result<axum::response::Response, std::convert::Infallible>> + Send,
> + Clone {
    let connection = budget.map(Connection::new);
    let router = TowerToHyperService::new(router);
    hyper::service::service_fn(move |mut request: hyper::Request<hyper::body::Incoming>| {
        if let Some(connection) = &connection {
            request.extensions_mut().insert(connection.clone());
        }
        hyper::service::Service::call(&router, request)
    })
}

/// The next connection, once one of the `max_connections` slots is free. `None` after an accept
/// error (out of file descriptors, a connection reset before it was accepted): the loop goes on
/// after a short pause instead of spinning or stopping the server.
async fn accept(
    listener: &TcpListener,
    open: &Arc<Semaphore>,
) -> Option<(TcpStream, tokio::sync::OwnedSemaphorePermit)> {
    let permit = Arc::clone(open).acquire_owned().await.ok()?;
    match listener.accept().await {
        Ok((stream, _)) => Some((stream, permit)),
        Err(_) => {
            tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
            None
        }
    }
}

/// How long accepting pauses after an error.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(20);

/// hyper's timer for one connection's header-read deadlines, on one tokio timer (the alarm) kept
/// for the connection's life.
///
/// hyper asks its timer for a new sleep each time it starts reading a request's head and drops
/// it once the head is in. A tokio sleep of its own per head is inserted into the runtime's
/// timer wheel and removed again (the wheel's lock, twice), and when its deadline falls before
/// the time the runtime's driver last parked until, inserting it wakes the driver (a write to
/// the driver's eventfd, and a wake-up on the other core): on the serve bench with 4
/// connections, about 0.18 such writes per request and 4–8% of the CPU per request (server and
/// clients). Here each head's sleep is a deadline checked against the clock, and the one alarm
/// only has to ring no later than the deadline: it is moved when it would ring late or has rung,
/// and is left alone when it rings early (a spurious wake of the connection's task, which its
/// next poll re-arms), so a head costs no insertion into the wheel: a clock read, a small box and
/// an uncontended lock. A connection's heads are read one at a time, by its one task.
#[derive(Clone)]
struct HeaderClock {
    alarm: Arc<Mutex<Pin<Box<Sleep>>>>,
}

impl HeaderClock {
    fn new() -> HeaderClock {
        // Registered in the wheel when a deadline first polls it.
        let alarm = Box::pin(tokio::time::sleep_until(Instant::now()));
        HeaderClock { alarm: Arc::new(Mutex::new(alarm)) }
    }
}

impl hyper::rt::Timer for HeaderClock {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.sleep_until(self.now() + duration)
    }

    fn sleep_until(&self, deadline: std::time::Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(HeaderDeadline { deadline: deadline.into(), alarm: Arc::clone(&self.alarm) })
    }

    /// tokio's clock, which the alarm keeps (and tests may pause).
    fn now(&self) -> std::time::Instant {
        Instant::now().into_std()
    }
}

/// One head's deadline on its connection's [`HeaderClock`].
struct HeaderDeadline {
    deadline: Instant,
    alarm: Arc<Mutex<Pin<Box<Sleep>>>>,
}

impl hyper::rt::Sleep for HeaderDeadline {}

impl Future for HeaderDeadline {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let deadline = self.deadline;
        // Only this connection's task polls the alarm: the lock is never contended, and a
        // panic while it is held leaves a timer that is at worst re-armed.
        let mut alarm = self.alarm.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if Instant::now() >= deadline {
                return Poll::Ready(());
            }
            if alarm.deadline() > deadline || alarm.is_elapsed() {
                alarm.as_mut().reset(deadline);
            }
            if alarm.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
    }
}

/// A socket that fails its pending read or write once nothing has moved either way for `idle`.
/// The timer is re-armed lazily (only when it fires early), so busy connections pay one clock
/// read per transfer and no timer-wheel churn.
struct IdleTimeout {
    inner: TcpStream,
    idle: Duration,
    last_progress: Instant,
    timer: Pin<Box<Sleep>>,
}

impl IdleTimeout {
    fn new(inner: TcpStream, idle: Duration) -> IdleTimeout {
        let now = Instant::now();
        IdleTimeout { inner, idle, last_progress: now, timer: Box::pin(tokio::time::sleep_until(now + idle)) }
    }

    fn progressed(&mut self) {
        self.last_progress = Instant::now();
    }

    /// A write's outcome: bytes written are progress; a pending write counts toward idleness.
    fn after_write(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        match polled {
            Poll::Ready(Ok(written)) => {
                self.progressed();
                Poll::Ready(Ok(written))
            }
            Poll::Pending => self.poll_idle(cx).map(Err),
            ready => ready,
        }
    }

    /// Called while an operation is pending: an error once the connection has been idle too long.
    fn poll_idle(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        loop {
            let due = self.last_progress + self.idle;
            if self.timer.deadline() != due {
                self.timer.as_mut().reset(due);
            }
            match self.timer.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(()) if Instant::now() >= self.last_progress + self.idle => {
                    return Poll::Ready(io::Error::new(io::ErrorKind::TimedOut, "connection idle too long"));
                }
                Poll::Ready(()) => {}
            }
        }
    }
}

impl AsyncRead for IdleTimeout {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    self.progressed();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => self.poll_idle(cx).map(Err),
            ready => ready,
        }
    }
}

impl AsyncWrite for IdleTimeout {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.after_write(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.after_write(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
