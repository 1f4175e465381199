//! The fake Slack's speed: `chat.postMessage` requests per second through a plain HTTP/1.1
//! client on one keep-alive connection and on `SKI_BENCH_CONNECTIONS` (32) at once, each with a
//! token of its own and warmed up by `SKI_BENCH_WARM_UP` (250) posts before the clock starts, and
//! through slack-morphism; envelope round trips per second over Socket Mode (inject, client ack,
//! ack seen); the store under load (with `SKI_BENCH_STORED` messages stored, default 100k: a
//! thread reply's latency, a `conversations.history` page's over `SKI_BENCH_READS` (10k) reads,
//! threaded posting, RSS after the posts and after the reads); and `ski-fake-slack serve` start
//! to readiness line (median of `SKI_BENCH_RUNS` runs, default 50).
//!
//! With `SKI_BENCH_OTHER_SLACK` set to another fake Slack's Web API base URL
//! (`http://host:port/api`; `SKI_BENCH_OTHER_SLACK_CHANNEL` a channel it knows, default
//! `C000000001`; `SKI_BENCH_OTHER_SLACK_POSTS` posts per connection, default the fake's own
//! `SKI_BENCH_SPREAD_POSTS`, 1,500; `SKI_BENCH_OTHER_SLACK_NAME` its name in the output), the same
//! client loads it the same way right after the fake, and the many-connection row gets the ratio.
//! `cargo xtask bench --bench slack --with-other-slack` installs, starts and ends one (vercel-labs'
//! `emulate`) and sets these. Rows go to `$SKI_BENCH_DIR/rows/slack.json` (group `fake_slack`)
//! for `cargo xtask bench`. Without `--bench` (as `cargo test --benches` runs it) it only checks
//! that a short run works; in a debug build (`cargo test -p ski-mocks --bench slack -- --bench`)
//! it measures the build tests use.
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use ski::transport::child::{ChildSpec, spawn};
use ski_mocks::slack::{Config, FakeSlack, UserMessage};
use slack_morphism::prelude::*;
use tokio_tungstenite::tungstenite::Message as Frame;

const WAIT: Duration = Duration::from_secs(10);

async fn posts_per_second(count: usize) -> Result<f64> {
    let slack = FakeSlack::start(Config::default()).await?;
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_native_roots(tokio_rustls::rustls::crypto::ring::default_provider())?
        .https_or_http()
        .enable_http1()
        .build();
    let client = Arc::new(SlackClient::new(
        SlackClientHyperConnector::with_connector(https).with_slack_api_url(&slack.api_base_url()),
    ));
    let token = SlackApiToken::new("xoxb-bench".into());
    let session = client.open_session(&token);
    let request = SlackApiChatPostMessageRequest::new(
        "C0000000001".into(),
        SlackMessageContent::new().with_text("bench".into()),
    );
    session.chat_post_message(&request).await?;
    let started = Instant::now();
    for _ in 0..count {
        session.chat_post_message(&request).await?;
    }
    Ok(count as f64 / started.elapsed().as_secs_f64())
}

/// Where the plain keep-alive client posts: a fake's `host:port`, its Web API path and a channel
/// it knows.
struct PostTarget {
    address: String,
    api_path: String,
    channel: String,
}

impl PostTarget {
    /// `base_url` is a Web API base URL, `http://host:port/api`.
    fn new(base_url: &str, channel: &str) -> Result<PostTarget> {
        let rest = base_url
            .strip_prefix("http://")
            .with_context(|| format!("{base_url}: the plain client speaks http:// only"))?;
        let (address, api_path) = rest.split_once('/').unwrap_or((rest, ""));
        Ok(PostTarget {
            address: address.to_string(),
            api_path: format!("/{}", api_path.trim_end_matches('/')),
            channel: channel.to_string(),
        })
    }
}

/// `chat.postMessage` requests per second from the plainest keep-alive client: one HTTP/1.1
/// connection from a thread of its own, a form-encoded request written as bytes and the answer
/// read by its `Content-Length` (or its chunks). What the fake itself can serve, with almost
/// nothing spent on the client (slack-morphism's row adds its typed requests and answers).
async fn raw_posts_per_second(count: usize) -> Result<f64> {
    let slack = FakeSlack::start(Config::default()).await?;
    let target = PostTarget::new(&slack.api_base_url(), "C0000000001")?;
    tokio::task::spawn_blocking(move || raw_posts(&target, count)).await?
}

/// How the plain client loads a fake over many connections: each connection a thread of its
/// own with a token of its own, `warm_up` posts on every connection before the clock starts
/// (the fake's code paths, caches and, for a JIT-compiled fake, its compiled code are warm),
/// then `posts` posts on each.
#[derive(Clone, Copy)]
struct Spread {
    connections: usize,
    warm_up: usize,
    posts: usize,
}

impl Spread {
    fn total(self) -> usize {
        self.connections * self.posts
    }
}

/// The fake's `chat.postMessage` rate over `spread`'s connections.
async fn spread_posts_per_second(spread: Spread) -> Result<f64> {
    let slack = FakeSlack::start(Config::default()).await?;
    let target = PostTarget::new(&slack.api_base_url(), "C0000000001")?;
    tokio::task::spawn_blocking(move || spread_posts(&target, spread)).await?
}

/// The same client against another fake Slack, when `SKI_BENCH_OTHER_SLACK` names its Web API
/// base URL (`http://host:port/api`; `SKI_BENCH_OTHER_SLACK_CHANNEL`, default `C000000001`, a
/// channel it knows): `None` without it.
async fn other_fake_posts_per_second(spread: Spread) -> Result<Option<(String, f64)>> {
    let Ok(base_url) = std::env::var("SKI_BENCH_OTHER_SLACK") else {
        return Ok(None);
    };
    let channel =
        std::env::var("SKI_BENCH_OTHER_SLACK_CHANNEL").unwrap_or_else(|_| "C000000001".to_string());
    let target = PostTarget::new(&base_url, &channel)?;
    let rate = tokio::task::spawn_blocking(move || spread_posts(&target, spread)).await??;
    Ok(Some((base_url, rate)))
}

/// Posts over `spread.connections` connections at once; the clock runs from the moment every
/// connection has finished its warm-up to the moment the last one has finished its posts.
fn spread_posts(target: &PostTarget, spread: Spread) -> Result<f64> {
    let warmed = std::sync::Barrier::new(spread.connections + 1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..spread.connections)
            .map(|n| {
                let warmed = &warmed;
                scope.spawn(move || -> Result<()> {
                    let connection = PlainConnection::open(target, &format!("xoxb-bench-{n}"))
                        .and_then(|mut connection| {
                            for _ in 0..spread.warm_up {
                                connection.post()?;
                            }
                            Ok(connection)
                        });
                    // Every worker reaches the barrier, warmed up or failed, so none waits
                    // forever for one that failed.
                    warmed.wait();
                    let mut connection = connection?;
                    for _ in 0..spread.posts {
                        connection.post()?;
                    }
                    Ok(())
                })
            })
            .collect();
        warmed.wait();
        let started = Instant::now();
        for worker in workers {
            worker
                .join()
                .map_err(|_| anyhow::anyhow!("a posting thread panicked"))??;
        }
        Ok(spread.total() as f64 / started.elapsed().as_secs_f64())
    })
}

/// One connection posting with the plain client, warmed up by a tenth of `count` first.
fn raw_posts(target: &PostTarget, count: usize) -> Result<f64> {
    let mut connection = PlainConnection::open(target, "xoxb-bench")?;
    for _ in 0..=count / 10 {
        connection.post()?;
    }
    let started = Instant::now();
    for _ in 0..count {
        connection.post()?;
    }
    Ok(count as f64 / started.elapsed().as_secs_f64())
}

/// A keep-alive HTTP/1.1 connection that posts one fixed `chat.postMessage` request, written as
/// bytes, and reads each answer by its `Content-Length` (or its chunks).
struct PlainConnection {
    request: Vec<u8>,
    writer: std::net::TcpStream,
    reader: std::io::BufReader<std::net::TcpStream>,
    line: String,
    answer: Vec<u8>,
}

impl PlainConnection {
    fn open(target: &PostTarget, token: &str) -> Result<PlainConnection> {
        let PostTarget {
            address,
            api_path,
            channel,
        } = target;
        let body = format!("channel={channel}&text=bench");
        let request = format!(
            "POST {api_path}/chat.postMessage HTTP/1.1\r\nhost: {address}\r\nauthorization: Bearer {token}\r\n\
             content-type: application/x-www-form-urlencoded\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        let stream = std::net::TcpStream::connect(address)
            .with_context(|| format!("connecting to {address}"))?;
        stream.set_nodelay(true)?;
        Ok(PlainConnection {
            request: request.into_bytes(),
            writer: stream.try_clone()?,
            reader: std::io::BufReader::new(stream),
            line: String::new(),
            answer: Vec::new(),
        })
    }

    fn read_line(&mut self) -> Result<()> {
        use std::io::BufRead;
        self.line.clear();
        anyhow::ensure!(
            self.reader.read_line(&mut self.line)? > 0,
            "the fake closed the connection"
        );
        Ok(())
    }

    fn post(&mut self) -> Result<()> {
        use std::io::{Read, Write};
        self.writer.write_all(&self.request)?;
        let mut length = None;
        let mut chunked = false;
        loop {
            self.read_line()?;
            let header = self.line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = Some(value.trim().parse::<usize>()?);
                } else if name.eq_ignore_ascii_case("transfer-encoding") {
                    chunked = value.trim().eq_ignore_ascii_case("chunked");
                }
            }
        }
        self.answer.clear();
        if chunked {
            loop {
                self.read_line()?;
                let size = usize::from_str_radix(self.line.trim_end(), 16)?;
                let start = self.answer.len();
                self.answer.resize(start + size, 0);
                self.reader.read_exact(&mut self.answer[start..])?;
                self.read_line()?;
                if size == 0 {
                    break;
                }
            }
        } else {
            let length = length.context("an answer without Content-Length")?;
            self.answer.resize(length, 0);
            self.reader.read_exact(&mut self.answer)?;
        }
        anyhow::ensure!(
            self.answer.starts_with(b"{\"ok\":true"),
            "a failed post: {}",
            String::from_utf8_lossy(&self.answer)
        );
        Ok(())
    }
}

/// A keep-alive slack-morphism session on the fake, for the store measurements.
struct Poster {
    client: Arc<SlackHyperClient>,
    token: SlackApiToken,
}

impl Poster {
    fn new(slack: &FakeSlack) -> Result<Poster> {
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_native_roots(tokio_rustls::rustls::crypto::ring::default_provider())?
            .https_or_http()
            .enable_http1()
            .build();
        let client = Arc::new(SlackClient::new(
            SlackClientHyperConnector::with_connector(https)
                .with_slack_api_url(&slack.api_base_url()),
        ));
        Ok(Poster {
            client,
            token: SlackApiToken::new("xoxb-bench".into()),
        })
    }

    async fn post(&self, thread: Option<&SlackTs>) -> Result<SlackTs> {
        let mut request = SlackApiChatPostMessageRequest::new(
            "C0000000001".into(),
            SlackMessageContent::new().with_text("bench".into()),
        );
        request.thread_ts = thread.cloned();
        let session = self.client.open_session(&self.token);
        Ok(session.chat_post_message(&request).await?.ts)
    }

    async fn history(&self) -> Result<usize> {
        let request = SlackApiConversationsHistoryRequest::new()
            .with_channel("C0000000001".into())
            .with_limit(100);
        let session = self.client.open_session(&self.token);
        Ok(session
            .conversations_history(&request)
            .await?
            .messages
            .len())
    }
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// The resident set size of this process (the fake runs in it), in MiB.
fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<f64>()
                .ok()
        })
        .map_or(0.0, |kib| kib / 1024.0)
}

/// What the store does with `stored` messages in it.
struct Load {
    stored: usize,
    fill_rate: f64,
    rss_mib: f64,
    reads: usize,
    rss_after_reads_mib: f64,
    reply_p50: Duration,
    history_p50: Duration,
    threaded_rate: f64,
}

/// Fills a fake with `stored` posts, then times `samples` thread replies, `reads` history
/// pages (limit 100; the request log keeps what its byte bounds allow of each) and threaded
/// posting, noting the RSS after the posts and after the reads.
async fn store_under_load(stored: usize, samples: usize, reads: usize) -> Result<Load> {
    let slack = FakeSlack::start(Config::default()).await?;
    let poster = Poster::new(&slack)?;
    let started = Instant::now();
    for _ in 0..stored {
        poster.post(None).await?;
    }
    let fill_rate = stored as f64 / started.elapsed().as_secs_f64();
    let rss_after_posts = rss_mib();
    let root = poster.post(None).await?;
    let mut replies = Vec::with_capacity(samples);
    for _ in 0..samples {
        let started = Instant::now();
        poster.post(Some(&root)).await?;
        replies.push(started.elapsed());
    }
    let mut histories = Vec::with_capacity(reads);
    for _ in 0..reads {
        let started = Instant::now();
        anyhow::ensure!(poster.history().await? == 100, "a full page of history");
        histories.push(started.elapsed());
    }
    let rss_after_reads_mib = rss_mib();
    // Threaded posting: a root and nine replies, over and over.
    let threaded = samples * 10;
    let started = Instant::now();
    for _ in 0..samples {
        let root = poster.post(None).await?;
        for _ in 0..9 {
            poster.post(Some(&root)).await?;
        }
    }
    let threaded_rate = threaded as f64 / started.elapsed().as_secs_f64();
    Ok(Load {
        stored,
        fill_rate,
        rss_mib: rss_after_posts,
        reads,
        rss_after_reads_mib,
        reply_p50: median(replies),
        history_p50: median(histories),
        threaded_rate,
    })
}

async fn round_trips_per_second(count: usize) -> Result<f64> {
    let mut config = Config::default();
    config.socket_mode.ping_interval_ms = 0;
    let slack = FakeSlack::start(config).await?;
    let url = format!("{}?ticket=bench", slack.socket_mode_url());
    let (socket, _) = Box::pin(tokio_tungstenite::connect_async(url.as_str())).await?;
    let (mut sink, mut source) = socket.split();
    // The client: acks every envelope as it arrives.
    let client = tokio::spawn(async move {
        while let Some(Ok(frame)) = source.next().await {
            if let Frame::Text(text) = frame {
                let frame: Value = serde_json::from_str(text.as_str()).unwrap_or_default();
                if let Some(id) = frame.get("envelope_id") {
                    let ack = json!({ "envelope_id": id }).to_string();
                    if sink.send(Frame::text(ack)).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    slack.wait_for_connections(1, WAIT).await?;
    let message = UserMessage {
        channel: "C0000000001".into(),
        thread_ts: None,
        text: "bench".into(),
        user: "U0000000002".into(),
    };
    let started = Instant::now();
    for _ in 0..count {
        slack.user_message(message.clone())?.ack(WAIT).await?;
    }
    let rate = count as f64 / started.elapsed().as_secs_f64();
    client.abort();
    Ok(rate)
}

async fn readiness(runs: usize) -> Result<(Duration, Duration)> {
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        let mut child = spawn(
            ChildSpec::new("ski-fake-slack", env!("CARGO_BIN_EXE_ski-fake-slack"))
                .arg("serve")
                .grace(Duration::from_millis(500)),
        )?;
        child.next_line().await?.context("no readiness line")?;
        times.push(started.elapsed());
        child.shutdown().await?;
    }
    times.sort();
    let p90 = times[(times.len() * 9 / 10).min(times.len() - 1)];
    Ok((times[times.len() / 2], p90))
}

fn bench_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("SKI_BENCH_DIR") {
        return Ok(PathBuf::from(dir));
    }
    let exe = std::env::current_exe().context("the bench's own path")?;
    let target = exe
        .ancestors()
        .nth(3)
        .context("the bench runs from target/<profile>/deps")?;
    Ok(target.join("bench"))
}

/// A count from the environment for a full run; the quick run's own otherwise.
fn knob(name: &str, quick: bool, full: usize, short: usize) -> usize {
    if quick {
        return short;
    }
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(full)
}

async fn run(quick: bool) -> Result<()> {
    let posts = knob("SKI_BENCH_POSTS", quick, 20_000, 20);
    let trips = knob("SKI_BENCH_TRIPS", quick, 5_000, 20);
    let runs = knob("SKI_BENCH_RUNS", quick, 50, 2);
    let stored = knob("SKI_BENCH_STORED", quick, 100_000, 200);
    let reads = knob("SKI_BENCH_READS", quick, 10_000, 20);
    let spread = Spread {
        connections: knob("SKI_BENCH_CONNECTIONS", quick, 32, 32),
        warm_up: knob("SKI_BENCH_WARM_UP", quick, 250, 1),
        posts: knob("SKI_BENCH_SPREAD_POSTS", quick, 1_500, 2),
    };
    // The other fake may limit requests per token (emulate answers 403 after 5,000): each of
    // its connections has a token of its own, and its posts per connection can be lowered.
    let other_spread = Spread {
        posts: knob(
            "SKI_BENCH_OTHER_SLACK_POSTS",
            quick,
            spread.posts,
            spread.posts,
        ),
        ..spread
    };
    let other_name =
        std::env::var("SKI_BENCH_OTHER_SLACK_NAME").unwrap_or_else(|_| "the other fake".into());
    let load = store_under_load(stored, if quick { 5 } else { 100 }, reads).await?;
    println!(
        "fake_slack: {} posts stored at {:.0}/s, RSS {:.0} MiB; then thread reply p50 {:.2} ms, \
         conversations.history (limit 100) p50 {:.2} ms over {} reads, RSS after them {:.0} MiB; \
         threaded posting {:.0}/s",
        load.stored,
        load.fill_rate,
        load.rss_mib,
        load.reply_p50.as_secs_f64() * 1e3,
        load.history_p50.as_secs_f64() * 1e3,
        load.reads,
        load.rss_after_reads_mib,
        load.threaded_rate
    );
    let raw_post_rate = raw_posts_per_second(posts).await?;
    let spread_rate = spread_posts_per_second(spread).await?;
    let other = other_fake_posts_per_second(other_spread).await?;
    let post_rate = posts_per_second(posts).await?;
    let trip_rate = round_trips_per_second(trips).await?;
    let (median, p90) = readiness(runs).await?;
    println!(
        "fake_slack: chat.postMessage {raw_post_rate:.0}/s (plain keep-alive client, one \
         connection), {post_rate:.0}/s (slack-morphism) over {posts} requests"
    );
    println!(
        "fake_slack: chat.postMessage {spread_rate:.0}/s over {} connections ({} requests after \
         {} each to warm up)",
        spread.connections,
        spread.total(),
        spread.warm_up
    );
    if let Some((base_url, rate)) = &other {
        println!(
            "fake_slack: {other_name} at {base_url}: chat.postMessage {rate:.0}/s (the same \
             client, {} connections, {} requests after {} each to warm up); ski-fake-slack {:.1}x",
            other_spread.connections,
            other_spread.total(),
            other_spread.warm_up,
            spread_rate / rate
        );
    }
    println!("fake_slack: socket mode round trips {trip_rate:.0}/s over {trips} envelopes");
    println!(
        "fake_slack: start to readiness median {:.1} ms, p90 {:.1} ms over {runs} runs",
        median.as_secs_f64() * 1e3,
        p90.as_secs_f64() * 1e3
    );
    if quick {
        return Ok(());
    }
    let nanos = |duration: Duration| u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
    let connections = spread.connections;
    let mut rows = vec![
        json!({ "group": "fake_slack", "name": "chat.postMessage via a plain keep-alive HTTP/1.1 client", "id": "post_raw", "messages": posts, "msgs_per_s": raw_post_rate }),
        json!({ "group": "fake_slack", "name": format!("chat.postMessage over {connections} keep-alive connections, warmed up"), "id": "post_spread", "messages": spread.total(), "connections": connections, "msgs_per_s": spread_rate }),
        json!({ "group": "fake_slack", "name": "chat.postMessage via slack-morphism (keep-alive)", "id": "post", "messages": posts, "msgs_per_s": post_rate }),
        json!({ "group": "fake_slack", "name": "socket mode envelope round trip", "id": "envelope", "messages": trips, "msgs_per_s": trip_rate }),
        json!({ "group": "fake_slack", "name": "thread reply with the store full", "id": "reply_loaded", "stored": load.stored, "median_ns": nanos(load.reply_p50) }),
        json!({ "group": "fake_slack", "name": "conversations.history (limit 100) with the store full", "id": "history_loaded", "stored": load.stored, "reads": load.reads, "median_ns": nanos(load.history_p50) }),
        json!({ "group": "fake_slack", "name": "threaded posting (a root and 9 replies) with the store full", "id": "threaded", "stored": load.stored, "msgs_per_s": load.threaded_rate }),
        json!({ "group": "fake_slack", "name": "RSS after filling the store", "id": "rss", "stored": load.stored, "rss_mib": load.rss_mib }),
        json!({ "group": "fake_slack", "name": "RSS after filling the store and reading history pages", "id": "rss_reads", "stored": load.stored, "reads": load.reads, "rss_mib": load.rss_after_reads_mib }),
        json!({ "group": "fake_slack", "name": "ski-fake-slack serve start to readiness", "id": "start", "median_ns": nanos(median), "p90_ns": nanos(p90), "runs": runs }),
    ];
    if let Some((_, rate)) = other {
        rows.push(json!({ "group": "fake_slack", "name": format!("chat.postMessage on {other_name} over {connections} connections, warmed up, same client"),
            "id": "post_spread_other", "messages": other_spread.total(), "connections": connections, "msgs_per_s": rate }));
        rows[1]["baseline"] = json!("post_spread_other");
    }
    let dir = bench_dir()?.join("rows");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("slack.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&json!({ "rows": rows }))?,
    )?;
    println!("rows: {}", path.display());
    Ok(())
}

fn main() -> Result<()> {
    let quick = !std::env::args().any(|arg| arg == "--bench");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run(quick))
}
