//! NDJSON framing: line endings, blank lines, bad lines that must not stop the stream, oversize
//! lines with a bounded buffer (including a 1 GiB newline-free flood), chunk-split invariance,
//! and the writer's one-line guarantee.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use proptest::prelude::*;
use rstest::rstest;
use serde_json::json;
use ski::jsonrpc::framing::READ_CHUNK;
use ski::jsonrpc::{
    DecodeError, FrameError, LineReader, LineWriter, Message, RpcError, VersionField, decode,
};
use tokio::io::{AsyncRead, ReadBuf};

/// An `AsyncRead` that hands out the given chunks one per read (splitting a chunk only when the
/// caller's buffer is smaller), returning `Pending` once between chunks to exercise wakeups.
struct Chunked {
    chunks: Vec<Vec<u8>>,
    next: usize,
    offset: usize,
    yield_next: bool,
}

impl Chunked {
    fn new(chunks: Vec<Vec<u8>>) -> Self {
        Self {
            chunks,
            next: 0,
            offset: 0,
            yield_next: false,
        }
    }
}

impl AsyncRead for Chunked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.yield_next {
            self.yield_next = false;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        while self.next < self.chunks.len() && self.offset == self.chunks[self.next].len() {
            self.next += 1;
            self.offset = 0;
        }
        if self.next == self.chunks.len() {
            return Poll::Ready(Ok(()));
        }
        let (next, offset) = (self.next, self.offset);
        let chunk = &self.chunks[next][offset..];
        let n = chunk.len().min(buf.remaining());
        buf.put_slice(&chunk[..n]);
        self.offset += n;
        self.yield_next = true;
        Poll::Ready(Ok(()))
    }
}

/// Every item the reader produces, as text or as an error description.
#[derive(Debug, PartialEq, Eq)]
enum Item {
    Line(Vec<u8>),
    Oversize(u64),
}

async fn read_all<R: AsyncRead + Unpin>(reader: &mut LineReader<R>) -> Vec<Item> {
    let mut items = Vec::new();
    while let Some(item) = reader.next_line().await {
        match item {
            Ok(line) => items.push(Item::Line(line.to_vec())),
            Err(FrameError::Oversize { length, .. }) => items.push(Item::Oversize(length)),
            Err(FrameError::Io(error)) => panic!("unexpected read error {error}"),
        }
    }
    items
}

async fn lines_of(input: &[u8], max: usize) -> Vec<Item> {
    let mut reader = LineReader::with_max_line_bytes(input, max);
    read_all(&mut reader).await
}

fn line(text: &str) -> Item {
    Item::Line(text.as_bytes().to_vec())
}

#[tokio::test]
async fn lf_crlf_and_blank_lines() {
    let input = b"{\"a\":1}\n{\"b\":2}\r\n\n   \n\t\r\n\r\n{\"c\":3}\n";
    assert_eq!(
        lines_of(input, 1024).await,
        vec![line("{\"a\":1}"), line("{\"b\":2}"), line("{\"c\":3}")]
    );
}

#[tokio::test]
async fn a_final_line_without_terminator_is_still_read() {
    assert_eq!(
        lines_of(b"{\"a\":1}\n{\"b\":2}", 1024).await,
        vec![line("{\"a\":1}"), line("{\"b\":2}")]
    );
    assert_eq!(
        lines_of(b"{\"a\":1}\n  \r", 1024).await,
        vec![line("{\"a\":1}")]
    );
    assert_eq!(lines_of(b"", 1024).await, vec![]);
}

#[tokio::test]
async fn bad_lines_are_reported_one_by_one_and_the_stream_goes_on() {
    let input = b"not json\n\xff\xfe{}\n[{\"jsonrpc\":\"2.0\",\"method\":\"m\"}]\n{\"jsonrpc\":\"2.0\",\"method\":\"ok\"}\n";
    let items = lines_of(input, 1024).await;
    let decoded: Vec<_> = items
        .iter()
        .map(|item| match item {
            Item::Line(bytes) => decode(bytes, VersionField::Required),
            Item::Oversize(_) => panic!("no line here is oversize"),
        })
        .collect();
    assert_eq!(decoded.len(), 4);
    assert!(matches!(decoded[0], Err(DecodeError::Parse { .. })));
    assert!(
        matches!(decoded[1], Err(DecodeError::Parse { .. })),
        "invalid utf-8"
    );
    let batch_answer = decoded[2].as_ref().unwrap_err().error_response().unwrap();
    assert_eq!(batch_answer.id, ski::jsonrpc::RequestId::Null);
    assert_eq!(
        batch_answer.result.unwrap_err().code,
        ski::jsonrpc::ErrorCode::INVALID_REQUEST
    );
    assert_eq!(
        decoded[3].as_ref().unwrap(),
        &Message::notification("ok", None)
    );
}

#[tokio::test]
async fn the_limit_is_exact_and_excludes_the_terminator() {
    let max = 16;
    let exact = "x".repeat(max);
    let over = "y".repeat(max + 1);
    let input = format!("{exact}\n{exact}\r\n{over}\n{over}\r\nz\n");
    assert_eq!(
        lines_of(input.as_bytes(), max).await,
        vec![
            line(&exact),
            line(&exact),
            Item::Oversize(max as u64 + 1),
            Item::Oversize(max as u64 + 1),
            line("z"),
        ]
    );
}

/// The same input split in many ways must give the same result (`usize::MAX`: one chunk).
#[rstest]
#[case(1)]
#[case(7)]
#[case(100)]
#[case(1023)]
#[case(1024)]
#[case(1025)]
#[case(4096)]
#[case::whole(usize::MAX)]
#[tokio::test]
async fn an_oversize_line_is_skipped_and_the_next_line_decodes(#[case] chunk: usize) {
    let max = 1024;
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"method\":\"big\",\"params\":{{\"t\":\"{}\"}}}}",
        "a".repeat(10 * max)
    );
    let valid = r#"{"jsonrpc":"2.0","id":1,"method":"after"}"#;
    let input = format!("{big}\n{valid}\n");
    let chunks = input.as_bytes().chunks(chunk).map(<[u8]>::to_vec).collect();
    let mut reader = LineReader::with_max_line_bytes(Chunked::new(chunks), max);
    let items = read_all(&mut reader).await;
    assert_eq!(
        items,
        vec![Item::Oversize(big.len() as u64), line(valid)],
        "chunk size {chunk}"
    );
    assert!(
        reader.high_water_mark() <= reader.buffer_bound(),
        "buffer grew to {} over the bound {}",
        reader.high_water_mark(),
        reader.buffer_bound()
    );
}

#[tokio::test]
async fn lines_split_across_reads_are_joined() {
    let input =
        b"{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\r\n{\"jsonrpc\":\"2.0\",\"method\":\"b\"}\n";
    for split in 1..input.len() {
        let chunks = vec![input[..split].to_vec(), input[split..].to_vec()];
        let mut reader = LineReader::with_max_line_bytes(Chunked::new(chunks), 1024);
        assert_eq!(
            read_all(&mut reader).await,
            vec![
                line(r#"{"jsonrpc":"2.0","method":"a"}"#),
                line(r#"{"jsonrpc":"2.0","method":"b"}"#)
            ],
            "split at {split}"
        );
    }
}

/// A reader producing `flood` bytes of `a` without any newline, then `tail`, generated lazily.
struct Flood {
    flood: u64,
    tail: Vec<u8>,
    tail_offset: usize,
}

impl AsyncRead for Flood {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        static BLOCK: [u8; 64 * 1024] = [b'a'; 64 * 1024];
        while buf.remaining() > 0 && self.flood > 0 {
            let n = (buf.remaining() as u64)
                .min(self.flood)
                .min(BLOCK.len() as u64) as usize;
            buf.put_slice(&BLOCK[..n]);
            self.flood -= n as u64;
        }
        if self.flood == 0 && buf.remaining() > 0 {
            let start = self.tail_offset;
            let n = (self.tail.len() - start).min(buf.remaining());
            buf.put_slice(&self.tail[start..start + n]);
            self.tail_offset += n;
        }
        Poll::Ready(Ok(()))
    }
}

#[tokio::test]
async fn a_one_gib_flood_without_newline_keeps_the_buffer_bounded() {
    const GIB: u64 = 1 << 30;
    let valid = r#"{"jsonrpc":"2.0","id":"after-flood","method":"ping"}"#;
    let flood = Flood {
        flood: GIB,
        tail: format!("\n{valid}\n").into_bytes(),
        tail_offset: 0,
    };
    let mut reader = LineReader::new(flood);
    match reader.next_line().await {
        Some(Err(FrameError::Oversize { length, limit })) => {
            assert_eq!(length, GIB);
            assert_eq!(limit, ski::jsonrpc::DEFAULT_MAX_LINE_BYTES);
        }
        other => panic!("expected an oversize error, got {other:?}"),
    }
    let line = reader.next_line().await.expect("a line").expect("no error");
    let message = decode(line, VersionField::Required).unwrap();
    assert_eq!(message.method(), Some("ping"));
    assert!(reader.next_line().await.is_none());
    let bound = ski::jsonrpc::DEFAULT_MAX_LINE_BYTES + READ_CHUNK + 2;
    assert_eq!(reader.buffer_bound(), bound);
    assert!(
        reader.high_water_mark() <= bound,
        "buffer reached {} bytes, over limit + {} = {bound}",
        reader.high_water_mark(),
        READ_CHUNK + 2
    );
    assert!(reader.buffer_capacity() <= bound);
}

#[tokio::test]
async fn the_writer_emits_one_line_per_message_and_raw_bytes_verbatim() {
    let mut out = Vec::new();
    {
        let mut writer = LineWriter::new(&mut out);
        writer
            .write_message(&Message::notification(
                "session/update",
                Some(json!({"text": "line1\nline2\r\n", "u": "\u{2028}"})),
            ))
            .await
            .unwrap();
        writer
            .write_message(&Message::error(3, RpcError::request_cancelled()))
            .await
            .unwrap();
        writer.write_raw(b"{\"broken\":\n").await.unwrap();
        assert!(writer.queue_line(b"a\nb").is_err());
    }
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    assert_eq!(lines.len(), 3, "{text:?}");
    assert_eq!(
        lines[1],
        "{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32800,\"message\":\"Request cancelled\"}}\n"
    );
    assert_eq!(lines[2], "{\"broken\":\n");
    let first = decode(lines[0].trim_end().as_bytes(), VersionField::Required).unwrap();
    assert_eq!(
        first,
        Message::notification(
            "session/update",
            Some(json!({"text": "line1\nline2\r\n", "u": "\u{2028}"}))
        )
    );
}

#[tokio::test]
async fn a_message_over_512_kib_round_trips_through_the_framing() {
    // Spec scenario 6: a single line of at least 512 KB encodes and decodes unchanged.
    let text: String = (0..600_000u32)
        .map(|i| match i % 97 {
            0 => '\n',
            1 => '"',
            2 => 'é',
            _ => char::from(b'a' + (i % 26) as u8),
        })
        .collect();
    let message = Message::request(
        "big-1",
        "session/prompt",
        Some(json!({"sessionId": "s", "prompt": [{"type": "text", "text": text}]})),
    );
    let mut stream = Vec::new();
    {
        let mut writer = LineWriter::new(&mut stream);
        writer.write_message(&message).await.unwrap();
        writer
            .write_message(&Message::notification("after", None))
            .await
            .unwrap();
    }
    assert!(stream.len() > 512 * 1024);
    let chunks = stream.chunks(4096).map(<[u8]>::to_vec).collect();
    let mut reader = LineReader::new(Chunked::new(chunks));
    let first = reader.next_line().await.unwrap().unwrap();
    assert!(first.len() > 512 * 1024);
    assert_eq!(decode(first, VersionField::Required).unwrap(), message);
    let second = reader.next_line().await.unwrap().unwrap();
    assert_eq!(
        decode(second, VersionField::Required).unwrap(),
        Message::notification("after", None)
    );
    assert!(reader.next_line().await.is_none());
}

fn arb_json() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        ".{0,20}".prop_map(serde_json::Value::from),
        "[\\n\\r\\t \"\\\\a-z]{0,12}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            prop::collection::btree_map("[a-zA-Z_]{1,6}", inner, 0..4)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

fn arb_message() -> impl Strategy<Value = Message> {
    let id = prop_oneof![
        Just(ski::jsonrpc::RequestId::Null),
        any::<i64>().prop_map(ski::jsonrpc::RequestId::Number),
        "[a-z0-9\\-\\n]{0,10}".prop_map(ski::jsonrpc::RequestId::String),
    ];
    let params = || {
        prop::option::of(
            prop::collection::btree_map("[a-z]{1,5}", arb_json(), 0..4)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        )
    };
    prop_oneof![
        (id.clone(), "[a-z/_$]{1,16}", params())
            .prop_map(|(id, method, params)| Message::request(id, method, params)),
        ("[a-z/_]{1,16}", params())
            .prop_map(|(method, params)| Message::notification(method, params)),
        (id.clone(), arb_json()).prop_map(|(id, result)| Message::success(id, result)),
        (id, any::<i32>(), ".{0,10}").prop_map(|(id, code, message)| Message::error(
            id,
            RpcError::new(ski::jsonrpc::ErrorCode(i64::from(code)), message)
        )),
    ]
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// However a stream of messages is cut into reads, the same messages come out.
    #[test]
    fn any_chunking_decodes_to_the_same_messages(
        messages in prop::collection::vec(arb_message(), 1..12),
        crlf in any::<bool>(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..16),
    ) {
        let mut stream = Vec::new();
        for message in &messages {
            let line = message.to_line().unwrap();
            prop_assert!(!line.contains('\n'));
            stream.extend_from_slice(line.as_bytes());
            stream.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
        }
        let mut points: Vec<usize> = cuts.iter().map(|i| i.index(stream.len() + 1)).collect();
        points.push(0);
        points.push(stream.len());
        points.sort_unstable();
        points.dedup();
        let chunks: Vec<Vec<u8>> = points.windows(2).map(|w| stream[w[0]..w[1]].to_vec()).collect();
        let decoded = runtime().block_on(async {
            let mut reader = LineReader::with_max_line_bytes(Chunked::new(chunks), 1 << 20);
            let mut out = Vec::new();
            while let Some(line) = reader.next_line().await {
                out.push(decode(line.unwrap(), VersionField::Required).unwrap());
            }
            out
        });
        prop_assert_eq!(decoded, messages);
    }

    /// The streaming decoder classifies every JSON text exactly as `classify` does on its value,
    /// for objects made of any subset of the JSON-RPC members with arbitrary values.
    #[test]
    fn decode_agrees_with_classify(
        members in prop::collection::btree_map(
            prop::sample::select(vec!["jsonrpc", "id", "method", "params", "result", "error", "x"]),
            prop_oneof![
                arb_json(),
                Just(json!("2.0")),
                Just(json!({"code": -32601, "message": "m"})),
                Just(json!("session/update")),
            ],
            0..7,
        ),
        top_level_array in any::<bool>(),
    ) {
        let object = serde_json::Value::Object(
            members.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
        );
        let value = if top_level_array { json!([object]) } else { object };
        let text = serde_json::to_vec(&value).unwrap();
        for version in [VersionField::Required, VersionField::Optional] {
            prop_assert_eq!(
                decode(&text, version),
                ski::jsonrpc::classify(value.clone(), version)
            );
        }
    }

    /// Arbitrary bytes, cut arbitrarily, never panic the reader or the decoder, and every
    /// oversize report is for a line that really was over the limit.
    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..2048),
        chunk in 1usize..64,
        max in 0usize..64,
    ) {
        let chunks = bytes.chunks(chunk).map(<[u8]>::to_vec).collect();
        runtime().block_on(async {
            let mut reader = LineReader::with_max_line_bytes(Chunked::new(chunks), max);
            while let Some(item) = reader.next_line().await {
                match item {
                    Ok(line) => {
                        assert!(line.len() <= max);
                        assert!(!line.contains(&b'\n'));
                        let _ = decode(line, VersionField::Required);
                        let _ = decode(line, VersionField::Optional);
                    }
                    Err(FrameError::Oversize { length, .. }) => assert!(length as usize > max),
                    Err(FrameError::Io(error)) => panic!("{error}"),
                }
                assert!(reader.high_water_mark() <= reader.buffer_bound());
            }
        });
    }
}
