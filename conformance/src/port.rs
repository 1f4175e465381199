//! Loopback ports for listeners and servers under test, with retry when a port is taken
//! (scenario WS-063b: "the test infrastructure retries and allocates a new port").
//!
//! Listeners of the harness bind port 0 and keep their socket, so they never race. A server under
//! test must bind the address itself: the harness then picks an address that is free at that
//! moment, starts the server on it, and when the server reports "address already in use" (another
//! process took the port in between, or a preferred port was occupied), picks a new port and starts
//! again, up to a bounded number of attempts. Every attempt is recorded so a check can prove the
//! retry happened.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use serde::Serialize;
use tokio::net::TcpListener;

/// How many addresses are tried before giving up, unless set otherwise.
pub const DEFAULT_ATTEMPTS: u32 = 5;

/// Errors of finding a port or starting something on one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PortError {
    /// Every attempt found its port in use.
    #[error("every one of {attempts} loopback ports tried was in use")]
    Exhausted {
        /// How many attempts were made.
        attempts: u32,
    },
    /// Binding failed for another reason than the port being in use.
    #[error("cannot bind {addr}: {cause}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why (shown in the message, so not also a `source`).
        cause: std::io::Error,
    },
}

/// One address tried and what happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PortAttempt {
    /// The address.
    pub addr: SocketAddr,
    /// `in use`, `ok`, or why the start failed.
    pub result: String,
}

/// Why starting something on an address did not work.
#[derive(Debug)]
pub enum StartError<E> {
    /// The address was in use: try another one.
    AddrInUse(String),
    /// Anything else: stop trying.
    Other(E),
}

/// The result of [`PortAllocator::start`]: what was started, where, and every attempt made.
#[derive(Debug)]
pub struct Started<T> {
    /// What the start function returned.
    pub value: T,
    /// The address it runs on.
    pub addr: SocketAddr,
    /// Every attempt, the successful one last.
    pub attempts: Vec<PortAttempt>,
}

/// Hands out loopback addresses and retries on "address in use".
#[derive(Debug, Clone, Copy)]
pub struct PortAllocator {
    host: IpAddr,
    attempts: u32,
}

impl Default for PortAllocator {
    fn default() -> Self {
        Self::loopback()
    }
}

impl PortAllocator {
    /// An allocator for 127.0.0.1 with [`DEFAULT_ATTEMPTS`] attempts.
    pub fn loopback() -> Self {
        Self {
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            attempts: DEFAULT_ATTEMPTS,
        }
    }

    /// Sets how many addresses are tried (at least one).
    pub fn attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts.max(1);
        self
    }

    /// Binds a listener the harness keeps: `preferred` first if given, else port 0; a preferred
    /// port in use moves on to a port chosen by the system.
    pub async fn bind(
        &self,
        preferred: Option<u16>,
    ) -> Result<(TcpListener, Vec<PortAttempt>), PortError> {
        let mut attempts = Vec::new();
        let mut port = preferred.unwrap_or(0);
        for _ in 0..self.attempts {
            let addr = SocketAddr::new(self.host, port);
            match TcpListener::bind(addr).await {
                Ok(listener) => {
                    let bound = listener
                        .local_addr()
                        .map_err(|cause| PortError::Bind { addr, cause })?;
                    attempts.push(PortAttempt {
                        addr: bound,
                        result: "ok".to_owned(),
                    });
                    return Ok((listener, attempts));
                }
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                    attempts.push(PortAttempt {
                        addr,
                        result: "in use".to_owned(),
                    });
                    port = 0;
                }
                Err(cause) => return Err(PortError::Bind { addr, cause }),
            }
        }
        Err(PortError::Exhausted {
            attempts: self.attempts,
        })
    }

    /// An address that is free at this moment (bound, then released) for another process to
    /// bind; `preferred` is tried first.
    async fn free_addr(
        &self,
        preferred: Option<u16>,
        attempts: &mut Vec<PortAttempt>,
    ) -> Result<SocketAddr, PortError> {
        let mut port = preferred.unwrap_or(0);
        loop {
            let addr = SocketAddr::new(self.host, port);
            match TcpListener::bind(addr).await {
                Ok(listener) => {
                    return listener
                        .local_addr()
                        .map_err(|cause| PortError::Bind { addr, cause });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                    attempts.push(PortAttempt {
                        addr,
                        result: "in use".to_owned(),
                    });
                    if attempts.len() >= self.attempts as usize {
                        return Err(PortError::Exhausted {
                            attempts: self.attempts,
                        });
                    }
                    port = 0;
                }
                Err(cause) => return Err(PortError::Bind { addr, cause }),
            }
        }
    }

    /// Starts something that binds an address itself (usually a server process), retrying on
    /// a new port whenever the start reports [`StartError::AddrInUse`].
    ///
    /// `preferred` is the first candidate port (a check uses it to occupy a port on purpose).
    /// Errors: [`StartError::Other`] ends the attempts at once; running out of attempts gives
    /// `Err(StartError::AddrInUse)` with every attempt listed.
    pub async fn start<T, E, F, Fut>(
        &self,
        preferred: Option<u16>,
        mut start: F,
    ) -> Result<Started<T>, (StartError<E>, Vec<PortAttempt>)>
    where
        F: FnMut(SocketAddr) -> Fut,
        Fut: Future<Output = Result<T, StartError<E>>>,
        E: From<PortError>,
    {
        let mut attempts = Vec::new();
        let mut next = preferred;
        while attempts.len() < self.attempts as usize {
            let addr = match self.free_addr(next.take(), &mut attempts).await {
                Ok(addr) => addr,
                Err(e) => return Err((StartError::Other(E::from(e)), attempts)),
            };
            match start(addr).await {
                Ok(value) => {
                    attempts.push(PortAttempt {
                        addr,
                        result: "ok".to_owned(),
                    });
                    return Ok(Started {
                        value,
                        addr,
                        attempts,
                    });
                }
                Err(StartError::AddrInUse(detail)) => attempts.push(PortAttempt {
                    addr,
                    result: format!("in use: {detail}"),
                }),
                Err(StartError::Other(e)) => return Err((StartError::Other(e), attempts)),
            }
        }
        let summary = format!("every one of {} addresses was in use", attempts.len());
        Err((StartError::AddrInUse(summary), attempts))
    }
}

/// Whether a TCP port on this address can be bound right now.
pub async fn is_free(addr: SocketAddr) -> bool {
    TcpListener::bind(addr).await.is_ok()
}

/// Whether a process's output says its address was in use.
pub fn says_addr_in_use(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    lower.contains("address already in use")
        || lower.contains("addrinuse")
        || lower.contains("eaddrinuse")
        || lower.contains("address in use")
        || lower.contains("os error 98")
        || lower.contains("os error 48")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Boom(String);

    impl From<PortError> for Boom {
        fn from(e: PortError) -> Self {
            Boom(e.to_string())
        }
    }

    #[tokio::test]
    async fn bind_moves_on_from_an_occupied_preferred_port() {
        let (taken, _) = PortAllocator::loopback().bind(None).await.unwrap();
        let port = taken.local_addr().unwrap().port();
        let (listener, attempts) = PortAllocator::loopback().bind(Some(port)).await.unwrap();
        assert_ne!(listener.local_addr().unwrap().port(), port);
        assert_eq!(attempts.len(), 2);
        assert_eq!(attempts[0].result, "in use");
        assert_eq!(attempts[1].result, "ok");
    }

    #[tokio::test]
    async fn start_retries_until_the_start_function_gets_a_free_port() {
        let mut calls = 0;
        let started = PortAllocator::loopback()
            .start(None, |addr| {
                calls += 1;
                let n = calls;
                async move {
                    if n < 3 {
                        Err(StartError::<Boom>::AddrInUse(format!("{addr} taken")))
                    } else {
                        Ok(n)
                    }
                }
            })
            .await
            .unwrap();
        assert_eq!(started.value, 3);
        assert_eq!(started.attempts.len(), 3);
        assert!(started.attempts[0].result.starts_with("in use"));
        assert_eq!(started.attempts[2].addr, started.addr);
    }

    #[tokio::test]
    async fn start_gives_up_after_the_bounded_number_of_attempts() {
        let (result, attempts) = PortAllocator::loopback()
            .attempts(2)
            .start(None, |_| async {
                Err::<(), _>(StartError::<Boom>::AddrInUse(String::new()))
            })
            .await
            .unwrap_err();
        assert!(matches!(result, StartError::AddrInUse(_)));
        assert_eq!(attempts.len(), 2);
        let (other, _) = PortAllocator::loopback()
            .start(None, |_| async {
                Err::<(), _>(StartError::Other(Boom("no".into())))
            })
            .await
            .unwrap_err();
        assert!(matches!(other, StartError::Other(Boom(text)) if text == "no"));
    }

    #[test]
    fn address_in_use_messages_are_recognised() {
        assert!(says_addr_in_use(
            "Error: Address already in use (os error 98)"
        ));
        assert!(says_addr_in_use("listen EADDRINUSE: 127.0.0.1:80"));
        assert!(!says_addr_in_use("connection refused"));
    }
}
