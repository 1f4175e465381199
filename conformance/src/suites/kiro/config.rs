//! BR-01 (configuration) and BR-02 (startup prerequisites), and the named configuration tests:
//! judged from what `check` prints (the configuration or every violation) and its exit code.

use serde_json::Value;

use super::harness::{AGENT, Kiro, TOKEN, Wrapper};
use crate::suites::aof::adapter::Output;
use crate::{Check, CheckError, CheckResult, Ctx, Failure, ensure, ensure_eq};

/// Exit code of a refused configuration, prerequisite or provisioning step.
pub const EXIT_CONFIG: i32 = 3;

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "BR-01.1",
            "Runs `check` without BOT_TOKEN and with an empty one (refused, exit 3, a BOT_TOKEN violation), then with a token (accepted, printed redacted, the value nowhere in the output).",
            br_01_1,
        ),
        Check::new(
            "BR-01.2",
            "Runs `check` with KIRO_AGENT_NAME missing, \"\" and \"ab\" (refused, a KIRO_AGENT_NAME violation) and \"abc\" (accepted).",
            br_01_2,
        ),
        Check::new(
            "BR-01.3",
            "Runs `check` with agent names holding *, ., / and a space (refused) and \"A_b-9\" (accepted); a leading dash is KIRO-SKI-01.",
            br_01_3,
        ),
        Check::new(
            "BR-01.4",
            "Runs `check` with MAX_PROCESSES 0, -1, 1.5 and x (refused) and 1 (accepted, printed as 1).",
            br_01_4,
        ),
        Check::new(
            "BR-01.5",
            "Runs `check` with IDLE_TIMEOUT_SECONDS -1 and x (refused) and 0 (accepted, printed as 0).",
            br_01_5,
        ),
        Check::new(
            "BR-01.6",
            "Runs `check` with LOG_LEVEL TRACE and verbose (refused) and each of DEBUG, INFO, WARNING, ERROR (accepted, printed).",
            br_01_6,
        ),
        Check::new(
            "BR-01.7",
            "Runs `echo` with LOG_LEVEL=WARNING from .env while kiro-cli rewrites .env to ERROR before it starts: kiro-cli's stderr is still logged at WARN, and `check` prints the environment's value over the file's.",
            br_01_7,
        ),
        Check::new(
            "BR-02.1",
            "Runs `check` with no kiro-cli on PATH (refused, a PATH violation), then with the stand-in (accepted).",
            br_02_1,
        ),
        Check::new(
            "BR-02.2",
            "Runs `check` with KIRO_CONFIG_PATH naming a missing directory (refused, a KIRO_CONFIG_PATH violation).",
            br_02_2,
        ),
        Check::new(
            "BR-02.3",
            "Runs `check` with a template directory without agents/NAME.json (refused), then with it (accepted).",
            br_02_3,
        ),
        Check::new(
            "BR-02.4",
            "Runs `check` with WORKSPACE_BASE_PATH nested and missing (created, accepted) and below a regular file (refused).",
            br_02_4,
        ),
        Check::new(
            "BR-02.5",
            "Runs `echo` once with kiro-cli missing and once with the template missing: each is fatal (exit 3, no kiro-cli started); reporting both at once is KIRO-SKI-02.",
            br_02_5,
        ),
        Check::new(
            "BR-T06",
            "test_config_load_valid: every key from a .env file; `check` prints each value.",
            br_t06,
        ),
        Check::new(
            "BR-T07",
            "test_config_missing_required: `check` without BOT_TOKEN, then without KIRO_AGENT_NAME, fails with that key named.",
            br_t07,
        ),
        Check::new(
            "BR-T08",
            "test_config_invalid_agent_name: names with wildcards, dots and slashes are refused.",
            br_t08,
        ),
        Check::new(
            "BR-T09",
            "test_config_agent_name_too_short: a name under 3 characters is refused.",
            br_t09,
        ),
    ]
}

/// The printed configuration of an accepted `check`.
pub fn accepted(output: &Output) -> Result<Value, CheckError> {
    let printed = output.json()?;
    if output.code != Some(0) || printed["ok"] != true {
        return Err(Failure::new(
            format!("`{}` accepts the configuration", output.command),
            "exit 0 and {\"ok\":true,\"config\":{...}}",
        )
        .actual(format!(
            "exit {}; stdout: {}; stderr: {}",
            output.exit(),
            output.stdout.trim(),
            output.stderr.trim()
        ))
        .into());
    }
    Ok(printed["config"].clone())
}

/// Fails unless `check` refused with exit 3 and a violation of `key`.
pub fn refused(output: &Output, key: &str, case: &str) -> CheckResult {
    let printed = output.json().ok();
    let violations = printed
        .as_ref()
        .and_then(|p| p["violations"].as_array().cloned())
        .unwrap_or_default();
    let names_key = violations.iter().any(|v| v["key"] == key);
    if output.code == Some(EXIT_CONFIG) && names_key {
        return Ok(());
    }
    Err(Failure::new(
        format!("{case} is refused"),
        format!("exit {EXIT_CONFIG} and a violation with \"key\":\"{key}\""),
    )
    .actual(format!(
        "exit {}; stdout: {}; stderr: {}",
        output.exit(),
        output.stdout.trim(),
        output.stderr.trim()
    ))
    .into())
}

async fn check_with(ctx: &Ctx, key: &str, value: Option<&str>) -> Result<Output, CheckError> {
    let mut kiro = Kiro::new(ctx)?;
    match value {
        Some(value) => kiro.set(key, value),
        None => kiro.unset(key),
    }
    kiro.check().await
}

async fn br_01_1(ctx: Ctx) -> CheckResult {
    refused(
        &check_with(&ctx, "BOT_TOKEN", None).await?,
        "BOT_TOKEN",
        "a missing BOT_TOKEN",
    )?;
    refused(
        &check_with(&ctx, "BOT_TOKEN", Some("")).await?,
        "BOT_TOKEN",
        "an empty BOT_TOKEN",
    )?;
    let output = check_with(&ctx, "BOT_TOKEN", Some(TOKEN)).await?;
    let config = accepted(&output)?;
    ensure!(
        !output.stdout.contains(TOKEN) && !output.stderr.contains(TOKEN),
        "the bot token is never printed",
        "it appears in the output: {}",
        output.stdout.trim()
    );
    ensure!(
        config["BOT_TOKEN"].is_string(),
        "the printed configuration shows BOT_TOKEN redacted",
        "{config}"
    );
    Ok(())
}

async fn br_01_2(ctx: Ctx) -> CheckResult {
    refused(
        &check_with(&ctx, "KIRO_AGENT_NAME", None).await?,
        "KIRO_AGENT_NAME",
        "a missing agent name",
    )?;
    refused(
        &check_with(&ctx, "KIRO_AGENT_NAME", Some("")).await?,
        "KIRO_AGENT_NAME",
        "an empty agent name",
    )?;
    br_t09(ctx.clone()).await?;
    let mut kiro = Kiro::new(&ctx)?;
    kiro.set("KIRO_AGENT_NAME", "abc");
    kiro.template_file("agents/abc.json", "{}")?;
    let config = accepted(&kiro.check().await?)?;
    ensure_eq!(
        Value::from("abc"),
        config["KIRO_AGENT_NAME"],
        "the printed agent name"
    );
    Ok(())
}

async fn br_t09(ctx: Ctx) -> CheckResult {
    refused(
        &check_with(&ctx, "KIRO_AGENT_NAME", Some("ab")).await?,
        "KIRO_AGENT_NAME",
        "the 2-character name \"ab\"",
    )
}

/// Names the document's pattern `^[a-zA-Z0-9_-]+$` does not match: wildcards, dots, slashes.
const BAD_NAMES: [&str; 5] = ["tg*", "tg-acp*", "a.b.c", "../etc", "a/bc"];

/// Fails unless `check` refuses each agent name with a KIRO_AGENT_NAME violation.
pub async fn refuses_names(ctx: &Ctx, names: &[&str]) -> CheckResult {
    for name in names {
        refused(
            &check_with(ctx, "KIRO_AGENT_NAME", Some(name)).await?,
            "KIRO_AGENT_NAME",
            &format!("the agent name {name:?}"),
        )?;
    }
    Ok(())
}

async fn br_t08(ctx: Ctx) -> CheckResult {
    refuses_names(&ctx, &BAD_NAMES).await
}

async fn br_01_3(ctx: Ctx) -> CheckResult {
    refuses_names(&ctx, &BAD_NAMES).await?;
    refuses_names(&ctx, &["tg acp"]).await?;
    let mut kiro = Kiro::new(&ctx)?;
    kiro.set("KIRO_AGENT_NAME", "A_b-9");
    kiro.template_file("agents/A_b-9.json", "{}")?;
    accepted(&kiro.check().await?)?;
    Ok(())
}

async fn integer_rule(ctx: &Ctx, key: &str, bad: &[&str], good: &str) -> CheckResult {
    for value in bad {
        refused(
            &check_with(ctx, key, Some(value)).await?,
            key,
            &format!("{key}={value:?}"),
        )?;
    }
    let config = accepted(&check_with(ctx, key, Some(good)).await?)?;
    let printed = &config[key];
    ensure!(
        printed.as_u64().map(|n| n.to_string()).as_deref() == Some(good)
            || printed.as_str() == Some(good),
        format!("{key}={good} is loaded as {good}"),
        "printed {printed}"
    );
    Ok(())
}

async fn br_01_4(ctx: Ctx) -> CheckResult {
    integer_rule(&ctx, "MAX_PROCESSES", &["0", "-1", "1.5", "x"], "1").await
}

async fn br_01_5(ctx: Ctx) -> CheckResult {
    integer_rule(&ctx, "IDLE_TIMEOUT_SECONDS", &["-1", "x", "1.5"], "0").await
}

async fn br_01_6(ctx: Ctx) -> CheckResult {
    for bad in ["TRACE", "verbose", "WARN"] {
        refused(
            &check_with(&ctx, "LOG_LEVEL", Some(bad)).await?,
            "LOG_LEVEL",
            &format!("LOG_LEVEL={bad}"),
        )?;
    }
    for good in ["DEBUG", "INFO", "WARNING", "ERROR"] {
        let config = accepted(&check_with(&ctx, "LOG_LEVEL", Some(good)).await?)?;
        ensure_eq!(
            Value::from(good),
            config["LOG_LEVEL"],
            "the printed LOG_LEVEL"
        );
    }
    Ok(())
}

/// The stderr line of kiro-cli as the adapter logged it, if it did.
pub fn logged_marker(stderr: &str) -> Option<&str> {
    stderr
        .lines()
        .find(|line| line.contains(super::harness::STDERR_MARKER))
}

async fn br_01_7(ctx: Ctx) -> CheckResult {
    let mut kiro = Kiro::new(&ctx)?;
    kiro.unset("LOG_LEVEL");
    kiro.write_env_file("LOG_LEVEL=WARNING\n")?;
    kiro.wrapper(Wrapper::RewritesEnvFile)?;
    let echo = kiro.echo("Say exactly: frozen", &[]).await?;
    echo.ensure_code(0)?;
    let line = logged_marker(&echo.output.stderr).unwrap_or("");
    ensure!(
        line.contains("WARN") && !line.contains("ERROR"),
        "kiro-cli's stderr is logged at the level loaded at startup (WARNING), not the one written later",
        "{}",
        echo.summary()
    );
    let argv = echo
        .transcript()?
        .records
        .first()
        .map(|r| r["argv"].to_string())
        .unwrap_or_default();
    ensure!(
        argv.contains(AGENT),
        "kiro-cli gets the agent name loaded at startup",
        "argv {argv}"
    );
    // Loaded once, from one source order: the environment wins over the .env file.
    let mut kiro = Kiro::new(&ctx)?;
    kiro.write_env_file("MAX_PROCESSES=9\nLOG_LEVEL=ERROR\n")?;
    kiro.set("MAX_PROCESSES", "4");
    let config = accepted(&kiro.check().await?)?;
    ensure_eq!(
        Value::from(4),
        config["MAX_PROCESSES"],
        "MAX_PROCESSES from the environment over .env"
    );
    ensure_eq!(
        Value::from("DEBUG"),
        config["LOG_LEVEL"],
        "LOG_LEVEL from the environment over .env"
    );
    Ok(())
}

async fn br_02_1(ctx: Ctx) -> CheckResult {
    let kiro = Kiro::new(&ctx)?;
    kiro.remove_kiro_cli()?;
    // Only the scenario's bin dir and the system's directories are on PATH.
    let mut kiro = kiro;
    kiro.set(
        "PATH",
        &format!("{}:/usr/bin:/bin", kiro.root().join("bin").display()),
    );
    if std::path::Path::new("/usr/bin/kiro-cli").exists()
        || std::path::Path::new("/bin/kiro-cli").exists()
    {
        crate::skip!("a kiro-cli is installed in /usr/bin or /bin");
    }
    refused(&kiro.check().await?, "PATH", "a PATH without kiro-cli")?;
    let kiro = Kiro::new(&ctx)?;
    accepted(&kiro.check().await?)?;
    Ok(())
}

async fn br_02_2(ctx: Ctx) -> CheckResult {
    let mut kiro = Kiro::new(&ctx)?;
    kiro.set(
        "KIRO_CONFIG_PATH",
        &kiro.root().join("no-such-dir").display().to_string(),
    );
    refused(
        &kiro.check().await?,
        "KIRO_CONFIG_PATH",
        "a missing template directory",
    )
}

async fn br_02_3(ctx: Ctx) -> CheckResult {
    let mut kiro = Kiro::new(&ctx)?;
    kiro.set("KIRO_AGENT_NAME", "other-agent");
    refused(
        &kiro.check().await?,
        "KIRO_CONFIG_PATH",
        "a template without agents/other-agent.json",
    )?;
    kiro.template_file("agents/other-agent.json", "{}")?;
    accepted(&kiro.check().await?)?;
    Ok(())
}

async fn br_02_4(ctx: Ctx) -> CheckResult {
    let mut kiro = Kiro::new(&ctx)?;
    let nested = kiro.root().join("ws/a/b/c");
    kiro.set("WORKSPACE_BASE_PATH", &nested.display().to_string());
    accepted(&kiro.check().await?)?;
    ensure!(
        nested.is_dir(),
        "the missing workspace directory is created",
        "{} does not exist",
        nested.display()
    );
    let blocker = kiro.root().join("blocker");
    std::fs::write(&blocker, "a file").map_err(CheckError::harness)?;
    kiro.set(
        "WORKSPACE_BASE_PATH",
        &blocker.join("ws").display().to_string(),
    );
    refused(
        &kiro.check().await?,
        "WORKSPACE_BASE_PATH",
        "a workspace below a regular file",
    )
}

/// The two prerequisite failures of BR-02.5's checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// No kiro-cli on PATH (BR-02.1).
    KiroCli,
    /// KIRO_CONFIG_PATH names a missing directory (BR-02.2).
    Template,
}

/// A world whose prerequisites fail as `missing` says.
pub fn failing_prerequisites(ctx: &Ctx, missing: &[Missing]) -> Result<Kiro, CheckError> {
    let mut kiro = Kiro::new(ctx)?;
    if missing.contains(&Missing::KiroCli) {
        kiro.remove_kiro_cli()?;
        kiro.set(
            "PATH",
            &format!("{}:/usr/bin:/bin", kiro.root().join("bin").display()),
        );
    }
    if missing.contains(&Missing::Template) {
        kiro.set(
            "KIRO_CONFIG_PATH",
            &kiro.root().join("no-such-dir").display().to_string(),
        );
    }
    Ok(kiro)
}

async fn br_02_5(ctx: Ctx) -> CheckResult {
    for missing in [Missing::KiroCli, Missing::Template] {
        let kiro = failing_prerequisites(&ctx, &[missing])?;
        let echo = kiro.echo("Say exactly: HI", &[]).await?;
        echo.ensure_code(EXIT_CONFIG)?;
        ensure!(
            echo.named("spawned").is_empty() && echo.transcripts.is_empty(),
            format!("the bot does not start kiro-cli when {missing:?} fails"),
            "{}",
            echo.summary()
        );
    }
    Ok(())
}

async fn br_t06(ctx: Ctx) -> CheckResult {
    let mut kiro = Kiro::new(&ctx)?;
    let template = kiro.template().display().to_string();
    let workspace = kiro.root().join("w").display().to_string();
    for key in super::harness::KEYS {
        kiro.unset(key);
    }
    let text = format!(
        "BOT_TOKEN={TOKEN}\nKIRO_AGENT_NAME={AGENT}\nKIRO_CONFIG_PATH={template}\nWORKSPACE_BASE_PATH={workspace}\nMAX_PROCESSES=7\nIDLE_TIMEOUT_SECONDS=45\nLOG_LEVEL=WARNING\n"
    );
    kiro.write_env_file(&text)?;
    let config = accepted(&kiro.check().await?)?;
    ensure_eq!(
        Value::from(AGENT),
        config["KIRO_AGENT_NAME"],
        "KIRO_AGENT_NAME"
    );
    ensure_eq!(
        Value::from(template.as_str()),
        config["KIRO_CONFIG_PATH"],
        "KIRO_CONFIG_PATH"
    );
    ensure_eq!(
        Value::from(workspace.as_str()),
        config["WORKSPACE_BASE_PATH"],
        "WORKSPACE_BASE_PATH"
    );
    ensure_eq!(Value::from(7), config["MAX_PROCESSES"], "MAX_PROCESSES");
    ensure_eq!(
        Value::from(45),
        config["IDLE_TIMEOUT_SECONDS"],
        "IDLE_TIMEOUT_SECONDS"
    );
    ensure_eq!(Value::from("WARNING"), config["LOG_LEVEL"], "LOG_LEVEL");
    ensure!(
        config["BOT_TOKEN"].is_string() && config["BOT_TOKEN"] != TOKEN,
        "BOT_TOKEN is loaded and printed redacted",
        "{config}"
    );
    Ok(())
}

async fn br_t07(ctx: Ctx) -> CheckResult {
    refused(
        &check_with(&ctx, "BOT_TOKEN", None).await?,
        "BOT_TOKEN",
        "a missing BOT_TOKEN",
    )?;
    refused(
        &check_with(&ctx, "KIRO_AGENT_NAME", None).await?,
        "KIRO_AGENT_NAME",
        "a missing KIRO_AGENT_NAME",
    )
}
