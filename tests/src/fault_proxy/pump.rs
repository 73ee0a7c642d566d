//! One proxied connection: a reader and a writer per direction, with the chunks between
//! them in a bounded queue stamped with their delivery time.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rand::Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::{Counters, Faults, QUEUED_CHUNKS};

/// Largest chunk read at once.
const CHUNK: usize = 16 * 1024;

/// Why a direction stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// The sender closed its side (or the receiver went away): passed on in order.
    Closed,
    /// A fault reset the connection.
    Reset,
}

/// A connection's number and the proxy's wedge line: numbered below it, the connection
/// is blackholed for good.
#[derive(Clone, Debug)]
pub(super) struct Wedge {
    pub number: u64,
    pub below: watch::Receiver<u64>,
}

impl Wedge {
    fn wedged(&self) -> bool {
        self.number < *self.below.borrow()
    }
}

/// Closes `stream` with a TCP reset (no linger) rather than an orderly close.
pub(super) fn reset(stream: TcpStream) {
    let _ = stream.set_zero_linger();
    drop(stream);
}

/// Forwards both directions until both sides closed or a fault resets the connection.
pub(super) async fn connection(
    client: TcpStream,
    server: TcpStream,
    faults: [watch::Receiver<Faults>; 2],
    wedge: Wedge,
    counters: Arc<Counters>,
) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let [to_upstream, to_client] = faults;
    let up = direction(client_read, server_write, to_upstream, &wedge, &counters);
    let down = direction(server_read, client_write, to_client, &wedge, &counters);
    tokio::pin!(up, down);
    let (first, up_ended) = tokio::select! {
        end = &mut up => (end, true),
        end = &mut down => (end, false),
    };
    if first == End::Reset {
        counters.resets.fetch_add(1, Ordering::Relaxed);
        return;
    }
    // One side closed in order: let the other direction finish.
    let second = if up_ended { down.await } else { up.await };
    if second == End::Reset {
        counters.resets.fetch_add(1, Ordering::Relaxed);
    }
}

/// One direction: read chunks, apply the faults, deliver them in order at their time.
async fn direction(
    mut from: OwnedReadHalf,
    to: OwnedWriteHalf,
    faults: watch::Receiver<Faults>,
    wedge: &Wedge,
    counters: &Counters,
) -> End {
    let (queue, queued) = mpsc::channel::<(Instant, Vec<u8>)>(QUEUED_CHUNKS);
    let writer = deliver(queued, to, counters);
    let reader = async {
        let mut last = Instant::now();
        let mut buf = vec![0u8; CHUNK];
        // Dropped chunks are spread evenly from a random start (see `Faults::drop`).
        let mut owed: f64 = rand::thread_rng().r#gen();
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => return End::Closed,
                Ok(n) => n,
            };
            let f = *faults.borrow();
            owed += f.drop;
            let dropped = f.drop > 0.0 && owed >= 1.0;
            if f.reset || dropped {
                // The sender's socket closes with a reset when the connection is dropped.
                let _ = from.as_ref().set_zero_linger();
                return End::Reset;
            }
            if f.blackhole || wedge.wedged() {
                counters.blackholed.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let jitter = if f.jitter.is_zero() {
                0.0
            } else {
                rand::thread_rng().gen_range(-1.0..=1.0) * f.jitter.as_secs_f64()
            };
            let delay = (f.delay.as_secs_f64() + jitter).max(0.0);
            last = last.max(Instant::now() + Duration::from_secs_f64(delay));
            if queue.send((last, buf[..n].to_vec())).await.is_err() {
                return End::Closed;
            }
        }
    };
    tokio::pin!(writer);
    let end = tokio::select! {
        end = reader => end,
        () = &mut writer => return End::Closed,
    };
    if end == End::Closed {
        // Deliver what is queued, then pass the close on.
        drop(queue);
        writer.await;
    }
    end
}

/// Writes queued chunks at their delivery time; shuts the write side down at the end.
async fn deliver(
    mut queued: mpsc::Receiver<(Instant, Vec<u8>)>,
    mut to: OwnedWriteHalf,
    counters: &Counters,
) {
    while let Some((at, chunk)) = queued.recv().await {
        tokio::time::sleep_until(at).await;
        if to.write_all(&chunk).await.is_err() {
            return;
        }
        counters.forwarded.fetch_add(1, Ordering::Relaxed);
    }
    let _ = to.shutdown().await;
}
