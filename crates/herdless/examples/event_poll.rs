//! [`EventPoll`] with [`EventFd`]s and a [`Channel`]: one thread serving
//! many event sources.
//!
//! Three producer threads each signal their own `EventFd` once per unit of
//! work (the counter adds the signals up), and post a message on a shared
//! channel when they finish. The main thread watches the three eventfds
//! (edge-triggered: one event per new signal, drained with one read) and the
//! channel (level-triggered) with one `EventPoll`, and stops once it has
//! counted every unit and heard from every producer. The poller's counters
//! show how many source callbacks ran and how few of them woke the
//! consumer: the default lock-free ready list skips a callback while a
//! source's event is still pending.
//!
//! ```sh
//! cargo run --release -p herdless --example event_poll --features stats
//! ```

use std::error::Error;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use herdless::poll::{EventFdError, Readiness, Trigger};
use herdless::{Channel, EventFd, EventPoll};

/// Producer threads, each with its own eventfd.
const PRODUCERS: u64 = 3;
/// Units of work each producer signals, one `write(1)` each.
const UNITS: u64 = 20_000;
/// The token of the channel; the eventfds use their index.
const MESSAGES: u64 = 100;

fn main() -> Result<(), Box<dyn Error>> {
    let poller = EventPoll::new();
    let fds: Vec<Arc<EventFd>> = (0..PRODUCERS).map(|_| Arc::new(EventFd::new())).collect();
    let messages = Arc::new(Channel::<String>::new());
    for (token, fd) in (0..).zip(&fds) {
        poller.add(fd.clone(), token, Readiness::READABLE, Trigger::Edge)?;
    }
    poller.add(
        messages.clone(),
        MESSAGES,
        Readiness::READABLE,
        Trigger::Level,
    )?;

    let producers: Vec<_> = (0..PRODUCERS)
        .zip(&fds)
        .map(|(id, fd)| {
            let (fd, messages) = (fd.clone(), messages.clone());
            thread::spawn(move || -> Result<(), Box<dyn Error + Send + Sync>> {
                for _ in 0..UNITS {
                    fd.write(1)?;
                }
                messages
                    .send(format!("producer {id} sent {UNITS} units"))
                    .map_err(|_| "the message channel closed early")?;
                Ok(())
            })
        })
        .collect();

    let (mut counted, mut done) = (vec![0; fds.len()], Vec::new());
    let mut events = Vec::new();
    while counted.iter().sum::<u64>() < PRODUCERS * UNITS || (done.len() as u64) < PRODUCERS {
        // The timeout is a guard against a bug, not part of the protocol.
        if poller.wait(&mut events, 16, Duration::from_secs(5))? == 0 {
            return Err("no event for 5 s".into());
        }
        for event in &events {
            match event.token {
                MESSAGES => {
                    while let Ok(message) = messages.try_recv() {
                        done.push(message);
                    }
                }
                // Edge-triggered: this event is for the signals so far; one
                // read takes them all (WouldBlock if an earlier read did).
                fd => match fds[fd as usize].try_read() {
                    Ok(n) => counted[fd as usize] += n,
                    Err(EventFdError::WouldBlock) => {}
                    Err(e) => return Err(e.into()),
                },
            }
        }
    }
    for producer in producers {
        producer
            .join()
            .map_err(|_| "a producer panicked")?
            .map_err(|e| e.to_string())?;
    }

    for message in &done {
        println!("{message}");
    }
    println!(
        "counted {counted:?} units on {} eventfds with one poller",
        fds.len()
    );
    if cfg!(feature = "stats") {
        let st = poller.stats();
        println!(
            "poller ({:?} ready list): {} signals ran {} callbacks ({} queued an item, the other \
             signals found their event pending); {} harvests reported {} events; the consumer \
             was woken {} times",
            poller.kind(),
            PRODUCERS * UNITS + PRODUCERS,
            st.callbacks,
            st.queued,
            st.harvests,
            st.events,
            st.waiters.wakeups
        );
    } else {
        println!("(run with `--features stats` for the poller's event counters)");
    }
    Ok(())
}
