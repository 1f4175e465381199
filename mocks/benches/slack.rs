//! The fake Slack's speed: `chat.postMessage` requests per second through a plain HTTP/1.1
//! client and through slack-morphism (one keep-alive connection each), envelope round trips per
//! second over Socket Mode (inject, client ack, ack seen), the store under load (with
//! `SKI_BENCH_STORED` messages stored, default 100k: a thread reply's and a
//! `conversations.history` page's latency, threaded posting, RSS), and `ski-fake-slack serve`
//! start to readiness line (median of `SKI_BENCH_RUNS` runs, default 50). With
//! `SKI_BENCH_OTHER_SLACK` set to another fake Slack's Web API base URL (`http://host:port/api`,
//! started by the user; `SKI_BENCH_OTHER_SLACK_CHANNEL` a channel it knows,
//! `SKI_BENCH_OTHER_SLACK_POSTS` how many posts), the plain client measures it too in the same
//! run, and the plain row gets the ratio. Rows go to `$SKI_BENCH_DIR/rows/slack.json` (group
//! `fake_slack`) for `cargo xtask bench`. Without `--bench` (as `cargo test --benches` runs it)
//! it only checks that a short run works; in a debug build (`cargo test -p ski-mocks --bench
//! slack -- --bench`) it measures the build tests use.
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
        .with_native_roots()?
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

/// The same client against another fake Slack, when `SKI_BENCH_OTHER_SLACK` names its Web API
/// base URL (`http://host:port/api`; `SKI_BENCH_OTHER_SLACK_CHANNEL`, default `C000000001`, a
/// channel it knows): `None` without it.
async fn other_fake_posts_per_second(count: usize) -> Result<Option<(String, f64)>> {
    let Ok(base_url) = std::env::var("SKI_BENCH_OTHER_SLACK") else {
        return Ok(None);
    };
    let channel =
        std::env::var("SKI_BENCH_OTHER_SLACK_CHANNEL").unwrap_or_else(|_| "C000000001".to_string());
    let target = PostTarget::new(&base_url, &channel)?;
    let rate = tokio::task::spawn_blocking(move || raw_posts(&target, count)).await??;
    Ok(Some((base_url, rate)))
}

fn raw_posts(target: &PostTarget, count: usize) -> Result<f64> {
    use std::io::{BufRead, BufReader, Read, Write};
    let PostTarget {
        address,
        api_path,
        channel,
    } = target;
    let body = format!("channel={channel}&text=bench");
    let request = format!(
        "POST {api_path}/chat.postMessage HTTP/1.1\r\nhost: {address}\r\nauthorization: Bearer xoxb-bench\r\n\
         content-type: application/x-www-form-urlencoded\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let stream = std::net::TcpStream::connect(address)?;
    stream.set_nodelay(true)?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    let mut answer = Vec::new();
    let read_line = |reader: &mut BufReader<std::net::TcpStream>, line: &mut String| {
        line.clear();
        anyhow::ensure!(
            reader.read_line(line)? > 0,
            "the fake closed the connection"
        );
        Ok(())
    };
    let mut post = || -> Result<()> {
        writer.write_all(request.as_bytes())?;
        let mut length = None;
        let mut chunked = false;
        loop {
            read_line(&mut reader, &mut line)?;
            let header = line.trim_end();
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
        answer.clear();
        if chunked {
            loop {
                read_line(&mut reader, &mut line)?;
                let size = usize::from_str_radix(line.trim_end(), 16)?;
                let start = answer.len();
                answer.resize(start + size, 0);
                reader.read_exact(&mut answer[start..])?;
                read_line(&mut reader, &mut line)?;
                if size == 0 {
                    break;
                }
            }
        } else {
            answer.resize(length.context("an answer without Content-Length")?, 0);
            reader.read_exact(&mut answer)?;
        }
        anyhow::ensure!(
            answer.starts_with(b"{\"ok\":true"),
            "a failed post: {}",
            String::from_utf8_lossy(&answer)
        );
        Ok(())
    };
    post()?;
    let started = Instant::now();
    for _ in 0..count {
        post()?;
    }
    Ok(count as f64 / started.elapsed().as_secs_f64())
}

/// A keep-alive slack-morphism session on the fake, for the store measurements.
struct Poster {
    client: Arc<SlackHyperClient>,
    token: SlackApiToken,
}

impl Poster {
    fn new(slack: &FakeSlack) -> Result<Poster> {
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_native_roots()?
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
    reply_p50: Duration,
    history_p50: Duration,
    threaded_rate: f64,
}

async fn store_under_load(stored: usize, samples: usize) -> Result<Load> {
    let slack = FakeSlack::start(Config::default()).await?;
    let poster = Poster::new(&slack)?;
    let started = Instant::now();
    for _ in 0..stored {
        poster.post(None).await?;
    }
    let fill_rate = stored as f64 / started.elapsed().as_secs_f64();
    let rss_mib = rss_mib();
    let root = poster.post(None).await?;
    let mut replies = Vec::with_capacity(samples);
    for _ in 0..samples {
        let started = Instant::now();
        poster.post(Some(&root)).await?;
        replies.push(started.elapsed());
    }
    let mut histories = Vec::with_capacity(samples);
    for _ in 0..samples {
        let started = Instant::now();
        anyhow::ensure!(poster.history().await? == 100, "a full page of history");
        histories.push(started.elapsed());
    }
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
        rss_mib,
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

async fn run(quick: bool) -> Result<()> {
    let (posts, trips, runs) = if quick {
        (20, 20, 2)
    } else {
        (20_000, 5_000, 50)
    };
    let runs = std::env::var("SKI_BENCH_RUNS")
        .ok()
        .and_then(|runs| runs.parse().ok())
        .filter(|_| !quick)
        .unwrap_or(runs);
    let stored = std::env::var("SKI_BENCH_STORED")
        .ok()
        .and_then(|stored| stored.parse().ok())
        .filter(|_| !quick)
        .unwrap_or(if quick { 200 } else { 100_000 });
    let load = store_under_load(stored, if quick { 5 } else { 100 }).await?;
    println!(
        "fake_slack: {} posts stored at {:.0}/s, RSS {:.0} MiB; then thread reply p50 {:.2} ms, \
         conversations.history (limit 100) p50 {:.2} ms, threaded posting {:.0}/s",
        load.stored,
        load.fill_rate,
        load.rss_mib,
        load.reply_p50.as_secs_f64() * 1e3,
        load.history_p50.as_secs_f64() * 1e3,
        load.threaded_rate
    );
    let raw_post_rate = raw_posts_per_second(posts).await?;
    let other_posts = std::env::var("SKI_BENCH_OTHER_SLACK_POSTS")
        .ok()
        .and_then(|posts| posts.parse().ok())
        .unwrap_or(posts);
    let other = other_fake_posts_per_second(other_posts).await?;
    let post_rate = posts_per_second(posts).await?;
    let trip_rate = round_trips_per_second(trips).await?;
    let (median, p90) = readiness(runs).await?;
    println!(
        "fake_slack: chat.postMessage {raw_post_rate:.0}/s (plain keep-alive client), \
         {post_rate:.0}/s (slack-morphism) over {posts} requests"
    );
    if let Some((base_url, rate)) = &other {
        println!(
            "fake_slack: the other fake at {base_url}: chat.postMessage {rate:.0}/s (the same \
             plain keep-alive client, {other_posts} requests); ski-fake-slack {:.1}x",
            raw_post_rate / rate
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
    let mut rows = json!({ "rows": [
        { "group": "fake_slack", "name": "chat.postMessage via a plain keep-alive HTTP/1.1 client", "id": "post_raw", "messages": posts, "msgs_per_s": raw_post_rate },
        { "group": "fake_slack", "name": "chat.postMessage via slack-morphism (keep-alive)", "id": "post", "messages": posts, "msgs_per_s": post_rate },
        { "group": "fake_slack", "name": "socket mode envelope round trip", "id": "envelope", "messages": trips, "msgs_per_s": trip_rate },
        { "group": "fake_slack", "name": "thread reply with the store full", "id": "reply_loaded", "stored": load.stored,
          "median_ns": u64::try_from(load.reply_p50.as_nanos()).unwrap_or(u64::MAX) },
        { "group": "fake_slack", "name": "conversations.history (limit 100) with the store full", "id": "history_loaded", "stored": load.stored,
          "median_ns": u64::try_from(load.history_p50.as_nanos()).unwrap_or(u64::MAX) },
        { "group": "fake_slack", "name": "threaded posting (a root and 9 replies) with the store full", "id": "threaded", "stored": load.stored, "msgs_per_s": load.threaded_rate },
        { "group": "fake_slack", "name": "RSS after filling the store", "id": "rss", "stored": load.stored, "rss_mib": load.rss_mib },
        { "group": "fake_slack", "name": "ski-fake-slack serve start to readiness", "id": "start",
          "median_ns": u64::try_from(median.as_nanos()).unwrap_or(u64::MAX), "p90_ns": u64::try_from(p90.as_nanos()).unwrap_or(u64::MAX), "runs": runs },
    ]});
    if let (Some((_, rate)), Some(list)) = (other, rows["rows"].as_array_mut()) {
        list.push(json!({ "group": "fake_slack", "name": "chat.postMessage on the other fake (SKI_BENCH_OTHER_SLACK), same client",
            "id": "post_other", "messages": other_posts, "msgs_per_s": rate }));
        list[0]["baseline"] = json!("post_other");
    }
    let dir = bench_dir()?.join("rows");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("slack.json");
    std::fs::write(&path, serde_json::to_string_pretty(&rows)?)?;
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
