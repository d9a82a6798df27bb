//! Joining as a rank other than 0: connect to a listening rank, retrying until a deadline, and
//! run the joiner's side of the handshake ([`connect_stream`]).

use super::handshake::{check_prefix, encode_hello, nonce, prove, verify, Hello, Role, Verdict};
use super::stream::{read_full, remaining, resolve, write_full, Who};
use super::{check_token, CHALLENGE_LEN, NONCE_LEN, PROTOCOL_VERSION, VERDICT_LEN};
use crate::transport::error::{Error, Result};
use crate::transport::Rank;
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Why one attempt at joining did not give a stream.
#[derive(Debug)]
enum Attempt {
    /// The acceptor closed before it proved anything or after it did: try again.
    Retry(String),
    /// The acceptor is not who it should be, refused the joiner, or time ran out.
    Fail(Error),
}

/// One handshake as rank `me` of `size` with rank `peer` on the fresh stream `s`.
fn join(
    mut s: TcpStream,
    addr: &str,
    me: Rank,
    peer: Rank,
    size: u32,
    token: &[u8],
    deadline: Instant,
) -> std::result::Result<TcpStream, Attempt> {
    let who = Who { me, peer };
    let retry = |when: &'static str| {
        move |e: Error| match e {
            Error::PeerLost { detail, .. } => {
                Attempt::Retry(format!("rank {peer} at {addr} closed {when} ({detail})"))
            }
            e => Attempt::Fail(e),
        }
    };
    let _ = s.set_nodelay(true);
    let hello = Hello {
        rank: me,
        size,
        peer,
        nonce: nonce().map_err(Attempt::Fail)?,
    };
    write_full(&mut s, &encode_hello(&hello), deadline, &who)
        .map_err(retry("the connection before its challenge"))?;
    let mut ch = [0u8; CHALLENGE_LEN];
    read_full(&mut s, &mut ch, deadline, &who)
        .map_err(retry("the connection before its challenge"))?;
    check_prefix(&ch).map_err(|e| {
        Attempt::Fail(Error::Protocol(format!(
            "{addr} is not a commbench rank of protocol {PROTOCOL_VERSION}: {}",
            e.reason()
        )))
    })?;
    let mut acceptor_nonce = [0u8; NONCE_LEN];
    acceptor_nonce.copy_from_slice(&ch[12..12 + NONCE_LEN]);
    let proof = &ch[12 + NONCE_LEN..];
    if !verify(token, &hello, &acceptor_nonce, Role::Acceptor, proof).map_err(Attempt::Fail)? {
        return Err(Attempt::Fail(Error::Protocol(format!(
            "{addr} did not prove it knows the run's token, so rank {me} told it nothing: it is \
             not rank {peer} of this run, or the ranks were given different tokens"
        ))));
    }
    let mine = prove(token, &hello, &acceptor_nonce, Role::Joiner).map_err(Attempt::Fail)?;
    write_full(&mut s, &mine, deadline, &who)
        .map_err(retry("the connection during the handshake"))?;
    let mut v = [0u8; VERDICT_LEN];
    read_full(&mut s, &mut v, deadline, &who).map_err(retry(
        "the connection after the handshake, without a verdict",
    ))?;
    match Verdict::from_code(u32::from_le_bytes(v)) {
        Some(Verdict::Accepted) => {}
        Some(v) => {
            return Err(Attempt::Fail(Error::Protocol(
                v.refusal(addr, me, peer, size),
            )))
        }
        None => {
            return Err(Attempt::Fail(Error::Protocol(format!(
                "rank {peer} at {addr} answered with an unknown verdict {}",
                u32::from_le_bytes(v)
            ))))
        }
    }
    s.set_read_timeout(None)
        .and_then(|_| s.set_write_timeout(None))
        .map_err(|e| Attempt::Fail(Error::io("clearing socket timeouts", e)))?;
    Ok(s)
}

/// Connect as rank `me` of `size` to rank `peer` listening at `addr`, retrying until
/// `timeout` (the peer may not be listening yet, or may have dropped the connection before
/// proving itself), and run the handshake with `token`. The stream comes back blocking, with
/// `TCP_NODELAY` set. A peer that does not prove the token, or refuses this rank, is
/// [`Error::Protocol`]; no handshake in time is [`Error::Timeout`] naming `peer`.
pub fn connect_stream(
    addr: &str,
    me: Rank,
    peer: Rank,
    size: u32,
    token: &str,
    timeout: Duration,
) -> Result<TcpStream> {
    check_token(token)?;
    let addrs = resolve(addr)?;
    let deadline = Instant::now() + timeout;
    let mut last = String::from("no attempt");
    loop {
        let Some(left) = remaining(deadline) else {
            return Err(Error::Timeout {
                rank: me,
                what: format!("rank {peer} to listen at {addr} (last: {last})"),
                timeout,
            });
        };
        let mut got = None;
        for a in &addrs {
            match TcpStream::connect_timeout(a, left.min(Duration::from_secs(2))) {
                Ok(s) => {
                    got = Some(s);
                    break;
                }
                Err(e) => last = e.to_string(),
            }
        }
        if let Some(s) = got {
            match join(s, addr, me, peer, size, token.as_bytes(), deadline) {
                Ok(s) => return Ok(s),
                Err(Attempt::Fail(e)) => return Err(e),
                Err(Attempt::Retry(why)) => last = why,
            }
        }
        if let Some(left) = remaining(deadline) {
            std::thread::sleep(Duration::from_millis(20).min(left));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::rendezvous::handshake::decode_hello;
    use crate::launch::rendezvous::tests::{closed_by_peer, OTHER, T, TOKEN};
    use crate::launch::rendezvous::{Bootstrap, HELLO_LEN, MAGIC, MIN_TOKEN_LEN};
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::thread;

    #[test]
    fn a_fake_rank_0_is_refused_and_learns_nothing() {
        // Someone else took the port: it answers like rank 0 but does not know the token.
        let fake = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = fake.local_addr().unwrap().to_string();
        let a = addr.clone();
        let joiner = thread::spawn(move || Bootstrap::connect(&a, 1, 2, TOKEN, T));
        let (mut s, _) = fake.accept().unwrap();
        let mut hello = [0u8; HELLO_LEN];
        s.read_exact(&mut hello).unwrap();
        let h = decode_hello(&hello).unwrap();
        assert!(!hello
            .windows(MIN_TOKEN_LEN)
            .any(|w| TOKEN.as_bytes().windows(MIN_TOKEN_LEN).any(|t| t == w)));
        // Its best try: a proof under a guessed token.
        let an = [5u8; NONCE_LEN];
        let mut ch = MAGIC.to_vec();
        ch.extend_from_slice(&PROTOCOL_VERSION.to_le_bytes());
        ch.extend_from_slice(&an);
        ch.extend_from_slice(&prove(OTHER.as_bytes(), &h, &an, Role::Acceptor).unwrap());
        s.write_all(&ch).unwrap();
        match joiner.join().unwrap().unwrap_err() {
            Error::Protocol(m) => assert!(m.contains("did not prove"), "{m}"),
            e => panic!("{e}"),
        }
        // The joiner closed having sent nothing after its hello.
        assert!(closed_by_peer(&mut s));
    }

    #[test]
    fn refusals_with_the_right_token_say_why() {
        let l = Bootstrap::listen("127.0.0.1:0").unwrap();
        let addr = l.local_addr().to_string();
        let acc = thread::spawn(move || l.accept_all(2, TOKEN, T).map(drop));
        let e = connect_stream(&addr, 1, 0, 3, TOKEN, T)
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not have 3 ranks"), "{e}");
        let e = connect_stream(&addr, 1, 1, 2, TOKEN, T)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not rank 1"), "{e}");
        let e = connect_stream(&addr, 5, 0, 2, TOKEN, T)
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not expect"), "{e}");
        Bootstrap::connect(&addr, 1, 2, TOKEN, T).unwrap();
        acc.join().unwrap().unwrap();
    }

    #[test]
    fn connect_without_rendezvous_times_out() {
        // Bind then drop to get a port nobody listens on.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let e = Bootstrap::connect(
            &format!("127.0.0.1:{port}"),
            1,
            2,
            TOKEN,
            Duration::from_millis(300),
        )
        .unwrap_err();
        assert!(matches!(e, Error::Timeout { rank: 1, .. }), "{e}");
    }
}
