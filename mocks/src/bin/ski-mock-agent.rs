//! `ski-mock-agent`: a scriptable fake agent process (see `ski-mock-agent --help`).

use std::io::Write;

use clap::Parser;
use ski_mocks::agent::cli::{Action, Cli, ControlArgs, send_control};

fn main() {
    let argv: Vec<String> = std::env::args_os()
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    let cli = Cli::parse();
    let launch = match cli.into_action(argv) {
        Ok(Action::Run(launch)) => launch,
        Ok(Action::Control(args)) => control(&args),
        Ok(Action::Print(text)) => {
            let mut stdout = std::io::stdout();
            let _ = stdout.write_all(text.as_bytes());
            let _ = stdout.flush();
            return;
        }
        Err(message) => {
            eprintln!("ski-mock-agent: {message}");
            std::process::exit(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("ski-mock-agent: cannot start the runtime: {error}");
            std::process::exit(1);
        }
    };
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
        Err(error) => {
            eprintln!("ski-mock-agent: {error}");
            std::process::exit(1);
        }
    }
}

/// `ski-mock-agent control SOCKET JSON`: prints the reply; exits 0 if it is ok, 1 otherwise.
fn control(args: &ControlArgs) -> ! {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("ski-mock-agent: cannot start the runtime: {error}");
            std::process::exit(1);
        }
    };
    match runtime.block_on(send_control(args)) {
        Ok(reply) => {
            println!("{reply}");
            let ok = reply.get("ok").and_then(serde_json::Value::as_bool) == Some(true);
            std::process::exit(if ok { 0 } else { 1 });
        }
        Err(message) => {
            eprintln!("ski-mock-agent: {message}");
            std::process::exit(1);
        }
    }
}
