//! Checks of the session methods (load, list, resume, fork, delete, export, modes, config
//! options, models), capability gating and authentication. Variants: `minimal` advertises no
//! optional capability, `auth` advertises one auth method, `auth_required` refuses work until
//! authenticated, `paged` lists sessions in small pages (`settings.page_size`).
//!
//! One module per feature: [`gating`], [`auth`], [`state`] (modes, config options, models),
//! [`load`] (load and resume), [`list`] (list and delete), [`fork`] and [`export`].

mod auth;
mod export;
mod fork;
mod gating;
mod list;
pub(crate) mod load;
mod state;

use serde_json::{Value, json};

use crate::check::Check;
use crate::context::Ctx;

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    [
        gating::checks(),
        auth::checks(),
        state::checks(),
        load::checks(),
        list::checks(),
        fork::checks(),
        export::checks(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

fn session_params(ctx: &Ctx, session: &str) -> Value {
    json!({
        "sessionId": session,
        "cwd": ctx.temp_dir().display().to_string(),
        "mcpServers": [],
    })
}

/// The agent capability at any of `pointers`.
fn advertised(init: &Value, pointers: &[&str]) -> bool {
    pointers.iter().any(|p| {
        init.pointer(p)
            .is_some_and(|v| !v.is_null() && v != &json!(false))
    })
}
