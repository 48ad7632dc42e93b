//! Accepting connections on both listeners so that hostile clients are cut off by limits, not
//! by running out of memory or descriptors: a cap on open connections per listener, and a
//! deadline for a new connection's first bytes (a client that connects and sends nothing is
//! closed; HTTP/1 request heads then have hyper's header timeout, see `http::serve`).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;

/// The limits of one listener.
#[derive(Debug, Clone, Copy)]
pub struct ListenLimits {
    /// Connections open at once; more are closed as soon as they are accepted.
    pub max_connections: usize,
    /// A connection that has sent nothing by then is closed.
    pub first_bytes: Duration,
    /// An HTTP/1 request head (the first, or the next on a kept-alive connection) not
    /// received by then closes the connection: slow clients and idle keep-alive alike.
    pub header_timeout: Duration,
}

impl Default for ListenLimits {
    fn default() -> Self {
        Self { max_connections: 4096, first_bytes: Duration::from_secs(10), header_timeout: Duration::from_secs(10) }
    }
}

/// A connection under a listener's limits: it holds its place among the open connections
/// until dropped, and fails its reads once its opening bytes are late.
pub struct Guarded<IO> {
    io: IO,
    first_bytes: Option<Pin<Box<Sleep>>>,
    /// Bytes still due before the deadline is lifted.
    opening: usize,
    _place: OwnedSemaphorePermit,
}

impl<IO> Guarded<IO> {
    pub fn get_ref(&self) -> &IO {
        &self.io
    }
}

/// Gives out places among a listener's open connections.
#[derive(Clone)]
pub struct Places {
    semaphore: Arc<Semaphore>,
    limits: ListenLimits,
    opening: usize,
}

/// The HTTP/2 client connection preface: a gRPC connection must send it whole in time (hyper
/// would otherwise wait for its rest for ever).
pub const HTTP2_PREFACE_BYTES: usize = 24;

impl Places {
    pub fn new(limits: ListenLimits) -> Self {
        Self { semaphore: Arc::new(Semaphore::new(limits.max_connections)), limits, opening: 1 }
    }

    /// How many bytes a connection must send within the first-bytes deadline (1 by default).
    pub fn with_opening(mut self, bytes: usize) -> Self {
        self.opening = bytes.max(1);
        self
    }

    pub fn limits(&self) -> ListenLimits {
        self.limits
    }

    /// `io` under the limits, or `None` (drop it: the listener is full).
    pub fn admit<IO>(&self, io: IO) -> Option<Guarded<IO>> {
        let place = self.semaphore.clone().try_acquire_owned().ok()?;
        Some(Guarded { io, first_bytes: Some(Box::pin(tokio::time::sleep(self.limits.first_bytes))), opening: self.opening, _place: place })
    }

    /// Waits until every connection given a place has closed.
    pub async fn all_closed(&self) {
        let _all = self.semaphore.acquire_many(self.limits.max_connections as u32).await;
    }

    /// Open connections now.
    pub fn open(&self) -> usize {
        self.limits.max_connections - self.semaphore.available_permits()
    }
}

/// The plain TCP connections of a listener, under its limits (with `TCP_NODELAY`: small
/// responses would otherwise wait for delayed ACKs).
pub fn tcp_incoming(listener: TcpListener, places: Places) -> impl Stream<Item = io::Result<Guarded<TcpStream>>> {
    futures::stream::unfold((listener, places), |(listener, places)| async move {
        loop {
            match listener.accept().await {
                Ok((tcp, _)) => {
                    let _ = tcp.set_nodelay(true);
                    match places.admit(tcp) {
                        Some(conn) => return Some((Ok(conn), (listener, places))),
                        None => tracing::debug!("connection refused: the listener is at its connection limit"),
                    }
                }
                // One connection's failure (reset before accept) concerns only it.
                Err(e) if matches!(e.kind(), io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset) => {}
                Err(e) => {
                    tracing::error!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    })
}

impl<IO: AsyncRead + Unpin> AsyncRead for Guarded<IO> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        let Some(deadline) = self.first_bytes.as_mut() else { return polled };
        // Checked on data too: a client dribbling its opening a byte at a time is still late.
        let late = deadline.as_mut().poll(cx).is_ready();
        match &polled {
            Poll::Ready(Ok(())) => {
                let read = buf.filled().len() - before;
                self.opening = self.opening.saturating_sub(read);
                if self.opening == 0 {
                    self.first_bytes = None;
                } else if late && read > 0 {
                    return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "opening bytes not received within the first-bytes deadline")));
                }
            }
            Poll::Pending if late => {
                return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "no request within the first-bytes deadline")));
            }
            _ => {}
        }
        polled
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Guarded<IO> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

impl<IO: tonic::transport::server::Connected> tonic::transport::server::Connected for Guarded<IO> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        (client, listener.accept().await.unwrap().0)
    }

    #[tokio::test]
    async fn a_connection_that_sends_nothing_in_time_fails_and_one_that_does_is_kept() {
        let places = Places::new(ListenLimits { first_bytes: Duration::from_millis(50), ..Default::default() });
        let (_silent, server) = pair().await;
        let mut guarded = places.admit(server).expect("a place");
        let mut buf = [0u8; 8];
        let err = guarded.read(&mut buf).await.expect_err("too late");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);

        let (mut client, server) = pair().await;
        let mut guarded = places.admit(server).expect("a place");
        client.write_all(b"GET").await.unwrap();
        assert_eq!(guarded.read(&mut buf).await.unwrap(), 3);
        // Later reads may wait as long as they like.
        let later = tokio::time::timeout(Duration::from_millis(150), guarded.read(&mut buf)).await;
        assert!(later.is_err(), "still waiting, not failed");
    }

    #[tokio::test]
    async fn an_opening_sent_only_in_part_fails_when_late_even_while_bytes_trickle() {
        let places = Places::new(ListenLimits { first_bytes: Duration::from_millis(100), ..Default::default() }).with_opening(HTTP2_PREFACE_BYTES);
        let (mut client, server) = pair().await;
        let mut guarded = places.admit(server).expect("a place");
        let mut buf = [0u8; 64];
        let trickle = tokio::spawn(async move {
            for b in b"PRI * HTTP/2.0\r\n" {
                if client.write_all(&[*b]).await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            client
        });
        let failed = loop {
            match guarded.read(&mut buf).await {
                Ok(0) => panic!("closed by the client"),
                Ok(_) => {}
                Err(e) => break e,
            }
        };
        assert_eq!(failed.kind(), io::ErrorKind::TimedOut);
        drop(trickle.await.unwrap());

        let (mut client, server) = pair().await;
        let mut guarded = places.admit(server).expect("a place");
        client.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await.unwrap();
        let mut got = 0;
        while got < HTTP2_PREFACE_BYTES {
            got += guarded.read(&mut buf[got..]).await.unwrap();
        }
        let later = tokio::time::timeout(Duration::from_millis(250), guarded.read(&mut buf)).await;
        assert!(later.is_err(), "a whole preface lifts the deadline");
    }

    #[tokio::test]
    async fn a_full_listener_gives_no_place_until_a_connection_closes() {
        let places = Places::new(ListenLimits { max_connections: 1, ..Default::default() });
        let (_c1, s1) = pair().await;
        let (_c2, s2) = pair().await;
        let first = places.admit(s1).expect("a place");
        assert!(places.admit(s2).is_none());
        assert_eq!(places.open(), 1);
        drop(first);
        assert_eq!(places.open(), 0);
        tokio::time::timeout(Duration::from_secs(1), places.all_closed()).await.expect("all closed");
    }
}
