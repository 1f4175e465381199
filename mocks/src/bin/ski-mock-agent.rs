//! `ski-mock-agent`: a scriptable fake agent process (see `ski-mock-agent --help`).
//!
//! Exit codes: those of the script and the control channel while it runs; 2 a bad argument, 3 a
//! script, transcript or control socket that cannot be used, 5 an internal failure
//! (`ski::exit`).

use clap::Parser;
use ski::cli::output;
use ski::exit::CommandError;
use ski_mocks::agent::cli::{Action, Cli, ControlArgs, send_control};

fn main() {
    let argv: Vec<String> = std::env::args_os()
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    let cli = Cli::parse();
    let launch = match cli.into_action(argv) {
        Ok(Action::Run(launch)) => launch,
        Ok(Action::Listen(launch, address)) => listen(*launch, &address),
        Ok(Action::Control(args)) => control(&args),
        Ok(Action::Record(options)) => record(options),
        Ok(Action::Diff(options)) => diff(&options),
        Ok(Action::Print(text)) => {
            output::text(&text);
            return;
        }
        Err(error) => fail(&error),
    };
    let runtime = runtime();
    // The pipes register with the runtime's reactor, so they are made inside it.
    let _context = runtime.enter();
    let outcome = runtime.block_on(ski_mocks::agent::run(
        *launch,
        ski::transport::stdio::ProcessStdin::new(),
        ski::transport::stdio::ProcessStdout::new(),
        tokio::io::stderr(),
    ));
    match outcome {
        Ok(outcome) => std::process::exit(outcome.code),
        // A transcript or control socket path that cannot be used.
        Err(error) => fail(&CommandError::configuration(error)),
    }
}

/// Prints `ski-mock-agent: ERROR` on stderr and exits with the error's code.
fn fail(error: &CommandError) -> ! {
    eprintln!("ski-mock-agent: {error}");
    std::process::exit(i32::from(error.class.code()));
}

fn runtime() -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => fail(&CommandError::internal(
            anyhow::Error::new(error).context("cannot start the runtime"),
        )),
    }
}

/// `ski-mock-agent record --out FILE -- AGENT...`: exits with the agent's code.
fn record(options: ski_mocks::agent::record::RecordOptions) -> ! {
    let runtime = runtime();
    let _context = runtime.enter();
    let outcome = runtime.block_on(ski_mocks::agent::record::record(
        options,
        ski::transport::stdio::ProcessStdin::new(),
        ski::transport::stdio::ProcessStdout::new(),
        tokio::io::stderr(),
    ));
    match outcome {
        Ok(recorded) => std::process::exit(recorded.code),
        Err(error) => fail(&error),
    }
}

/// `ski-mock-agent diff RECORDING -- AGENT...`: prints the drift; exits 0 when there is none.
fn diff(options: &ski_mocks::agent::diff::DiffOptions) -> ! {
    let runtime = runtime();
    let _context = runtime.enter();
    match runtime.block_on(ski_mocks::agent::diff::diff(options)) {
        Ok(drift) => {
            output::text(&drift.render());
            std::process::exit(i32::from(!drift.changes.is_empty()));
        }
        Err(error) => fail(&error),
    }
}

/// `ski-mock-agent --listen HOST:PORT`: serves `/acp` until SIGTERM (143) or SIGINT (130).
fn listen(launch: ski_mocks::agent::Launch, address: &str) -> ! {
    let runtime = runtime();
    let _context = runtime.enter();
    match runtime.block_on(ski_mocks::agent::remote::listen(
        launch,
        address,
        tokio::io::stderr(),
    )) {
        Ok(code) => std::process::exit(code),
        Err(error) => fail(&error),
    }
}

/// `ski-mock-agent control SOCKET JSON`: prints the reply; exits 0 if it is ok, 1 otherwise.
fn control(args: &ControlArgs) -> ! {
    match runtime().block_on(send_control(args)) {
        Ok(reply) => {
            output::line(&reply);
            let ok = reply.get("ok").and_then(serde_json::Value::as_bool) == Some(true);
            std::process::exit(if ok { 0 } else { 1 });
        }
        Err(error) => fail(&error),
    }
}
