//! Error answers in each provider's shape: OpenAI's `{"error": {message, type, param, code}}`
//! and Anthropic's `{"type": "error", "error": {type, message}, "request_id"}`, with the
//! statuses the providers use (401, 429 with `retry-after`, 500, and overloaded: OpenAI 503,
//! Anthropic 529).

use serde_json::{Value, json};

use super::record::Api;
use super::script::ErrorKind;
use super::sse::Event;

/// Whose error shape an answer takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    OpenAi,
    Anthropic,
}

/// An error ready to send.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorAnswer {
    pub status: u16,
    pub body: Value,
    pub retry_after: Option<u64>,
}

/// The kinds the fake answers of its own accord, besides the scripted ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Scripted(ErrorKind),
    /// 404, a path no API has.
    NotFound,
    /// 413, a body over the fake's bound.
    TooLarge,
}

impl Refusal {
    fn status(self, provider: Provider) -> u16 {
        match self {
            Refusal::Scripted(ErrorKind::InvalidRequest) => 400,
            Refusal::Scripted(ErrorKind::Authentication) => 401,
            Refusal::Scripted(ErrorKind::RateLimit) => 429,
            Refusal::Scripted(ErrorKind::Server) => 500,
            Refusal::Scripted(ErrorKind::Overloaded) => match provider {
                Provider::OpenAi => 503,
                Provider::Anthropic => 529,
            },
            Refusal::NotFound => 404,
            Refusal::TooLarge => 413,
        }
    }

    /// OpenAI's `type` and `code`.
    fn openai_kind(self) -> (&'static str, Option<&'static str>) {
        match self {
            Refusal::Scripted(ErrorKind::InvalidRequest) | Refusal::NotFound => {
                ("invalid_request_error", None)
            }
            Refusal::TooLarge => ("invalid_request_error", Some("request_too_large")),
            Refusal::Scripted(ErrorKind::Authentication) => {
                ("invalid_request_error", Some("invalid_api_key"))
            }
            Refusal::Scripted(ErrorKind::RateLimit) => ("requests", Some("rate_limit_exceeded")),
            Refusal::Scripted(ErrorKind::Server) | Refusal::Scripted(ErrorKind::Overloaded) => {
                ("server_error", None)
            }
        }
    }

    /// Anthropic's `error.type`.
    fn anthropic_kind(self) -> &'static str {
        match self {
            Refusal::Scripted(ErrorKind::InvalidRequest) => "invalid_request_error",
            Refusal::Scripted(ErrorKind::Authentication) => "authentication_error",
            Refusal::Scripted(ErrorKind::RateLimit) => "rate_limit_error",
            Refusal::Scripted(ErrorKind::Server) => "api_error",
            Refusal::Scripted(ErrorKind::Overloaded) => "overloaded_error",
            Refusal::NotFound => "not_found_error",
            Refusal::TooLarge => "request_too_large",
        }
    }

    fn default_message(self, provider: Provider) -> &'static str {
        match (self, provider) {
            (Refusal::Scripted(ErrorKind::InvalidRequest), _) => "invalid request",
            (Refusal::Scripted(ErrorKind::Authentication), Provider::OpenAi) => {
                "Incorrect API key provided."
            }
            (Refusal::Scripted(ErrorKind::Authentication), Provider::Anthropic) => {
                "invalid x-api-key"
            }
            (Refusal::Scripted(ErrorKind::RateLimit), _) => "Rate limit reached for requests",
            (Refusal::Scripted(ErrorKind::Server), Provider::OpenAi) => {
                "The server had an error while processing your request."
            }
            (Refusal::Scripted(ErrorKind::Server), Provider::Anthropic) => "Internal server error",
            (Refusal::Scripted(ErrorKind::Overloaded), Provider::OpenAi) => {
                "The engine is currently overloaded, please try again later."
            }
            (Refusal::Scripted(ErrorKind::Overloaded), Provider::Anthropic) => "Overloaded",
            (Refusal::NotFound, _) => "Not found",
            (Refusal::TooLarge, _) => "Request exceeds the maximum allowed number of bytes.",
        }
    }
}

/// The error `refusal` in `provider`'s shape, with `message` or the kind's own.
pub fn answer(
    provider: Provider,
    refusal: Refusal,
    message: Option<&str>,
    retry_after: Option<u64>,
    request_number: u64,
) -> ErrorAnswer {
    let message = message.unwrap_or(refusal.default_message(provider));
    let body = match provider {
        Provider::OpenAi => {
            let (kind, code) = refusal.openai_kind();
            json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
        }
        Provider::Anthropic => json!({
            "type": "error",
            "error": {"type": refusal.anthropic_kind(), "message": message},
            "request_id": format!("req_ski{request_number:08}")
        }),
    };
    ErrorAnswer {
        status: refusal.status(provider),
        body,
        retry_after,
    }
}

/// The event that ends a stream which fails after it began, in the shape of `api`'s streams.
pub fn stream_error(api: Api, kind: ErrorKind, message: Option<&str>, sequence: usize) -> Event {
    let refusal = Refusal::Scripted(kind);
    match api {
        Api::ChatCompletions => {
            let message = message.unwrap_or(refusal.default_message(Provider::OpenAi));
            let (kind, code) = refusal.openai_kind();
            Event::data(&json!({"error": {
                "message": message, "type": kind, "param": null, "code": code
            }}))
        }
        Api::Responses => {
            let message = message.unwrap_or(refusal.default_message(Provider::OpenAi));
            let (kind, code) = refusal.openai_kind();
            Event::named(
                "error",
                &json!({"type": "error", "code": code.unwrap_or(kind), "message": message,
                        "param": null, "sequence_number": sequence}),
            )
        }
        _ => Event::named(
            "error",
            &json!({"type": "error", "error": {
                "type": refusal.anthropic_kind(),
                "message": message.unwrap_or(refusal.default_message(Provider::Anthropic))
            }}),
        ),
    }
}
