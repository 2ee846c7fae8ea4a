//! `serve/warmth`: what the `in_process` row's pricing costs when the core's caches are not left
//! to it, as they never are in a server.
//!
//! The in-process row prices request after request on one thread, so the engine's state, its
//! code and the next body stay in that core's caches. A server's core also carries the loopback
//! exchange (the kernel's send and receive, hyper, the clients), and serve's desk prices a
//! request on whichever worker is free, so the engine's state moves between the two cores. These
//! guests have no hardware counters to show cache misses, so this measures the effect the way a
//! user can check it: the same requests priced by the same code, the thread's CPU time inside
//! `MockEndpoint::handle` alone, under five conditions.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use forkcache_engine::endpoint::MockEndpoint;

use super::{
    Workload, chat, dealt, encode, endpoint, exchange, handle_nth, in_process, median_interval,
    start_null_server, thread_cpu,
};

/// Where the pricing core's caches stand when a request is priced.
#[derive(Clone, Copy)]
enum Condition {
    /// Each request priced right after the last on one thread: the `in_process` row.
    BackToBack,
    /// Before each request, one write per cache line over [`OTHER_MEMORY`] bytes of other
    /// memory: user-space memory traffic only, no system call.
    AfterOtherMemory,
    /// Before each request, the same request sent to a null server on one keep-alive connection
    /// and its reply read: the loopback exchange a server's core carries beside its pricing.
    AfterExchange,
    /// Back to back while a second thread prices the same requests on its own endpoint: whether
    /// the two cores slow each other down (a shared L3, memory bandwidth, SMT siblings).
    OtherCoreBusy,
    /// Back to back, but each request on the other of two threads pinned to two cores, the
    /// endpoint handed between them: its state follows the requests from core to core, as at
    /// serve's desk when a request is priced by the worker that did not read it.
    CoresInTurn,
}

const CONDITIONS: [(&str, Condition); 5] = [
    ("back to back", Condition::BackToBack),
    ("after 1 MiB of other memory", Condition::AfterOtherMemory),
    ("after a loopback exchange", Condition::AfterExchange),
    ("the other core busy", Condition::OtherCoreBusy),
    ("on two cores in turn", Condition::CoresInTurn),
];

/// How much other memory [`Condition::AfterOtherMemory`] writes over: more than a core's L2
/// cache on the EPYC hosts the figures come from (512 KiB), far less than their L3 (32 MiB).
const OTHER_MEMORY: usize = 1 << 20;

/// Each round prices `chat_4_connections` under every condition (the order rotates from round
/// to round) and keeps each condition's ratio to that round's back-to-back figure. Printed per
/// condition: the median CPU time per request and the median ratio, with a distribution-free
/// 95% interval, as `serve/paired` prints its own.
pub(super) fn summary(rounds: usize) {
    let requests = dealt(chat(), 4);
    let encoded = encode(&requests);
    let cores = two_cores();
    let (null_server, stop, thread) = start_null_server();
    let mut times = vec![Vec::with_capacity(rounds); CONDITIONS.len()];
    let mut ratios = vec![Vec::with_capacity(rounds); CONDITIONS.len()];
    for round in 0..rounds {
        let mut round_times = [None; CONDITIONS.len()];
        for k in 0..CONDITIONS.len() {
            let which = (round + k) % CONDITIONS.len();
            round_times[which] = match CONDITIONS[which].1 {
                Condition::BackToBack => Some(priced_after(&requests, |_| {})),
                Condition::AfterOtherMemory => Some(priced_after(&requests, touching_other_memory())),
                Condition::AfterExchange => Some(priced_after(&requests, exchanging(&encoded, null_server))),
                Condition::OtherCoreBusy => cores.map(|_| beside_a_busy_core(&requests)),
                Condition::CoresInTurn => cores.map(|cores| on_cores_in_turn(&requests, cores)),
            };
        }
        let back_to_back = round_times[0].expect("back to back needs nothing");
        for (which, time) in round_times.iter().enumerate() {
            if let Some(time) = time {
                times[which].push(time.as_secs_f64() * 1e6);
                ratios[which].push(time.as_secs_f64() / back_to_back.as_secs_f64());
            }
        }
    }
    drop(stop);
    thread.join().unwrap();
    println!("\nserve/warmth: CPU time inside `handle` per request, chat_4_connections, {rounds} rounds");
    println!("  {:<30} {:>9} {:>24}", "condition", "median", "to back to back, 95%");
    for (which, (name, _)) in CONDITIONS.iter().enumerate() {
        if times[which].is_empty() {
            println!("  {name:<30} (needs two cores this process may run on)");
            continue;
        }
        let median = median_interval(&mut times[which]).1;
        let (low, ratio, high) = median_interval(&mut ratios[which]);
        println!("  {name:<30} {median:>6.1} µs {ratio:>8.2}× [{low:.2}, {high:.2}]");
    }
}

/// Prices the `index`th request of `requests` ([`handle_nth`]): the calling thread's CPU time
/// inside it.
fn price(endpoint: &mut MockEndpoint, requests: &Workload, index: usize) -> Duration {
    let started = thread_cpu();
    handle_nth(endpoint, requests, index);
    thread_cpu() - started
}

/// Every request priced on this thread, `before(index)` run before each one: the CPU time per
/// request inside `handle`. What `before` costs is not counted; what it leaves in the core's
/// caches is.
fn priced_after(requests: &Workload, mut before: impl FnMut(usize)) -> Duration {
    let mut endpoint = endpoint();
    let count = requests.len() * requests[0].len();
    let mut pricing = Duration::ZERO;
    for index in 0..count {
        before(index);
        pricing += price(&mut endpoint, requests, index);
    }
    pricing / count as u32
}

/// [`Condition::AfterOtherMemory`]'s writes.
fn touching_other_memory() -> impl FnMut(usize) {
    let mut other = vec![0u8; OTHER_MEMORY];
    move |_| {
        for (line, byte) in other.iter_mut().step_by(64).enumerate() {
            *byte = byte.wrapping_add(line as u8);
        }
        std::hint::black_box(&other);
    }
}

/// [`Condition::AfterExchange`]'s exchanges: the `index`th of the `encoded` requests (in
/// [`price`]'s order) on one keep-alive connection to `null_server`.
fn exchanging(encoded: &Workload, null_server: SocketAddr) -> impl FnMut(usize) {
    let mut socket = std::net::TcpStream::connect(null_server).unwrap();
    socket.set_nodelay(true).unwrap();
    let mut reply = vec![0u8; 64 << 10];
    move |index| {
        let request = &encoded[index % encoded.len()][index / encoded.len()];
        exchange(&mut socket, request, &mut reply);
    }
}

/// Back to back, while another thread keeps pricing the same requests on an endpoint of its
/// own (the scheduler puts the two runnable threads on the two cores).
fn beside_a_busy_core(requests: &Workload) -> Duration {
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                in_process(requests);
            }
        });
        let time = priced_after(requests, |_| {});
        done.store(true, Ordering::Relaxed);
        time
    })
}

/// The requests priced one after another on two threads pinned to `cores`, in turn: each
/// thread prices one request and hands the endpoint to the other. The CPU time per request
/// inside `handle`, both threads' together.
fn on_cores_in_turn(requests: &Workload, cores: [usize; 2]) -> Duration {
    type Baton = (MockEndpoint, usize);
    let count = requests.len() * requests[0].len();
    let (to_first, at_first) = mpsc::channel::<Baton>();
    let (to_second, at_second) = mpsc::channel::<Baton>();
    to_first.send((endpoint(), 0)).unwrap();
    // Each thread prices what reaches it and passes the baton on; at `count` it passes the
    // baton once more, so that the other thread stops too, and stops.
    let pricer = |core: usize, inbox: mpsc::Receiver<Baton>, next: mpsc::Sender<Baton>| {
        move || {
            pin(core);
            let mut spent = Duration::ZERO;
            while let Ok((mut endpoint, index)) = inbox.recv() {
                if index == count {
                    let _ = next.send((endpoint, index));
                    break;
                }
                spent += price(&mut endpoint, requests, index);
                next.send((endpoint, index + 1)).unwrap();
            }
            spent
        }
    };
    std::thread::scope(|scope| {
        let first = scope.spawn(pricer(cores[0], at_first, to_second));
        let second = scope.spawn(pricer(cores[1], at_second, to_first));
        (first.join().unwrap() + second.join().unwrap()) / count as u32
    })
}

/// The first two CPUs this process may run on, if it may run on two.
fn two_cores() -> Option<[usize; 2]> {
    // SAFETY: an all-zero `cpu_set_t` is a valid empty set, and the kernel writes at most its
    // size into it.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        (libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) == 0).then_some(set)?
    };
    // SAFETY: `CPU_ISSET` reads the set; every index is below `CPU_SETSIZE`.
    let mut allowed = (0..libc::CPU_SETSIZE as usize).filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) });
    Some([allowed.next()?, allowed.next()?])
}

/// Pins the calling thread to `core`.
fn pin(core: usize) {
    // SAFETY: an all-zero `cpu_set_t` is a valid empty set; `core` comes from the process's own
    // affinity set, so it is below `CPU_SETSIZE`.
    let status = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set)
    };
    assert_eq!(status, 0, "pinning a thread to CPU {core}: {}", std::io::Error::last_os_error());
}
