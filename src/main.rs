//! `sluice`: run and validate change-data-capture pipelines.

#[cfg(feature = "sqlite")]
mod capture;
mod import;
#[cfg(feature = "sqlite")]
mod quickstart;
mod registry;
mod serve;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use sluice_engine::config::{load_pipeline, DurationSpec};
use sluice_runtime::admin::Endpoint;
use sluice_runtime::{PipelinePlan, RunOptions};

use registry::{Pipeline, SinkSpec, SourceSpec, TransformSpec};

/// Exit code: the pipeline failed while running (fatal error or retries exhausted).
const EXIT_FAILED: u8 = 1;
/// Exit code: a pipeline file is invalid (clap uses 2 for command-line errors).
const EXIT_INVALID: u8 = 3;

/// Change-data-capture pipelines with Debezium-compatible events.
#[derive(Debug, Parser)]
#[command(name = "sluice", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a pipeline until it is stopped (SIGINT/SIGTERM) or a stop condition is met.
    ///
    /// Exit codes: 0 stopped cleanly with offsets committed; 1 the pipeline failed;
    /// 2 bad command line; 3 invalid pipeline file.
    ///
    /// Sources: postgres, mysql, mariadb, sqlite, datagen; sqlserver, verified against an
    /// emulated SQL Server only (docs/components.md, `sqlserver`); and db2 (in builds with the `db2`
    /// feature), verified against an emulation of Db2's ASN capture only (docs/components.md, `db2`).
    Run {
        /// The pipeline file (YAML).
        pipeline: PathBuf,
        /// Stop once no new event arrived for this long and all are acknowledged (e.g. 2s).
        #[arg(long, value_parser = parse_duration)]
        stop_when_idle: Option<Duration>,
        /// Stop after the source emitted this many events.
        #[arg(long)]
        stop_after_events: Option<u64>,
    },
    /// Send a signal to a running pipeline through its admin endpoint (`admin.bind`).
    ///
    /// The signal is Debezium's: `{"id": "s-1", "type": "execute-snapshot", "data":
    /// {"data-collections": ["public.orders"]}}`. Exit codes: 0 queued; 1 refused or
    /// unreachable; 3 invalid pipeline file.
    Signal {
        /// The running pipeline's file (YAML); with `--server`, its file or its name.
        pipeline: PathBuf,
        #[command(flatten)]
        server: ServerArgs,
        /// The signal, as JSON.
        signal: String,
    },
    /// Show a running pipeline's status through its admin endpoint (`admin.bind`): state,
    /// restarts, events, committed position, last error, failing sinks, as JSON.
    ///
    /// Exit codes: 0 running and ready; 1 not running, not ready or unreachable; 3 invalid
    /// pipeline file.
    Status {
        /// The running pipeline's file (YAML); with `--server`, its file or its name.
        pipeline: PathBuf,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Watch the events a running pipeline's sinks are handed, after their transforms, through
    /// its admin endpoint (`admin.bind`), one JSON line each (`{"sink", "topic", "key",
    /// "value"}`, values without schemas), as `vector tap` shows them.
    ///
    /// The pipeline never waits for a tap: one that reads too slowly misses events, and says
    /// how many on stderr. Exit codes: 0 the tap ended (limit reached, pipeline stopped);
    /// 1 refused or unreachable; 3 invalid pipeline file.
    Tap {
        /// The running pipeline's file (YAML); with `--server`, its file or its name.
        pipeline: PathBuf,
        #[command(flatten)]
        server: ServerArgs,
        /// One sink's events only (by its `name`).
        #[arg(long)]
        sink: Option<String>,
        /// Topics matching this regular expression only (anchored).
        #[arg(long)]
        topic: Option<String>,
        /// Stop after this many events.
        #[arg(long)]
        limit: Option<u64>,
    },
    /// Print the pipeline file equivalent to a Debezium connector's Kafka Connect
    /// configuration (`{"name", "config"}` JSON as the REST API takes it, a flat JSON object,
    /// or a `.properties` file).
    ///
    /// `connector.class` picks the source, the connector's properties carry over as they are
    /// (Sluice takes Debezium's names), `transforms.*` become Sluice's transforms, the
    /// converters the Kafka sink's format; what has no equivalent is refused, naming the
    /// property. The file is checked as `validate` checks it. Exit codes: 0 printed; 3 refused.
    Import {
        /// The connector's configuration.
        connector: PathBuf,
        /// The Kafka brokers of the sink (the Connect worker's `bootstrap.servers`).
        #[arg(long, default_value = "${KAFKA_BOOTSTRAP_SERVERS:-localhost:9092}")]
        bootstrap_servers: String,
    },
    /// Run many pipelines in one process: the pipeline files of a directory (watched: a new
    /// file starts its pipeline, a changed one restarts it from its committed position, a
    /// removed one stops it) and the connectors registered through a Kafka Connect-compatible
    /// REST API, which takes Debezium connector configurations unchanged (docs/operate.md).
    ///
    /// One admin endpoint serves them all (status, signals, tap, the page, metrics). A
    /// pipeline failing never stops the others. Stops every pipeline gracefully at SIGINT or
    /// SIGTERM. Exit codes: 0 stopped; 1 could not start.
    Serve {
        /// The directory of pipeline files (`*.yaml`, `*.yml`), watched.
        #[arg(long)]
        pipelines: Option<PathBuf>,
        /// The admin endpoint's address (beyond this machine it needs a token:
        /// `--token-file` or `SLUICE_ADMIN_TOKEN`).
        #[arg(long, default_value = "127.0.0.1:8083")]
        bind: String,
        /// A file whose first line is the endpoint's bearer token.
        #[arg(long)]
        token_file: Option<PathBuf>,
        /// HTTPS: the endpoint's certificate chain (PEM), with `--tls-key`.
        #[arg(long, requires = "tls_key")]
        tls_certificate: Option<PathBuf>,
        /// HTTPS: the endpoint's private key (PEM).
        #[arg(long, requires = "tls_certificate")]
        tls_key: Option<PathBuf>,
        /// HTTPS with client certificates: the CAs (PEM) that must have signed a client's
        /// certificate (then no token is needed beyond this machine).
        #[arg(long, requires = "tls_certificate")]
        tls_client_ca: Option<PathBuf>,
        /// Where the REST API's connectors and their offsets are kept.
        #[arg(long, default_value = ".sluice/serve")]
        data_dir: PathBuf,
        /// The Kafka brokers the REST API's connectors write to (the worker's
        /// `bootstrap.servers`; default `${KAFKA_BOOTSTRAP_SERVERS:-localhost:9092}`).
        #[arg(long)]
        bootstrap_servers: Option<String>,
        /// A Kafka Connect worker's properties (`bootstrap.servers`, `producer.*`, the
        /// converters) for the REST API's connectors.
        #[arg(long)]
        worker_config: Option<PathBuf>,
        /// Bytes all pipelines' queues may hold together (each pipeline's
        /// `max_queue_size_bytes` times its queues); a pipeline over it does not start.
        #[arg(long, default_value = "1GiB", value_parser = parse_bytes)]
        max_queue_bytes: u64,
        /// How often the directory is looked at.
        #[arg(long, default_value = "1s", value_parser = parse_duration)]
        watch_interval: Duration,
    },
    /// Make SQLite tables capture their changes (change tables filled by triggers), or stop it.
    ///
    /// Exit codes: 0 done; 1 refused (the reason on one line).
    #[cfg(feature = "sqlite")]
    Capture {
        #[command(subcommand)]
        action: capture::CaptureAction,
    },
    /// Run Sluice's main job on an embedded default: a demo SQLite database in capture mode,
    /// changed by a writer for a few seconds, through `pipelines/quickstart.yaml` to the console
    /// and a JSON-lines file; ends by itself with a summary.
    #[cfg(feature = "sqlite")]
    Quickstart {
        /// Where the database, the events and the offsets go.
        #[arg(long, default_value = ".sluice/quickstart")]
        dir: PathBuf,
        /// Start over: remove the directory first.
        #[arg(long)]
        fresh: bool,
        /// How long the writer keeps changing the database.
        #[arg(long, default_value_t = 5)]
        seconds: u64,
    },
    /// Check pipeline files without connecting to anything.
    ///
    /// Exit codes: 0 all valid; 3 at least one invalid (each error is printed as
    /// FILE:LINE:COLUMN: `key`: message).
    Validate {
        /// Pipeline files (YAML).
        #[arg(required = true)]
        pipelines: Vec<PathBuf>,
    },
}

/// Where a pipeline of `sluice serve` is reached (instead of its file's `admin`), and what an
/// HTTPS endpoint is trusted with and shown.
#[derive(Debug, clap::Args)]
struct ServerArgs {
    /// The admin endpoint of a `sluice serve` running the pipeline (`127.0.0.1:8083`).
    #[arg(long)]
    server: Option<String>,
    /// With `--server`: a file whose first line is its token (else `SLUICE_ADMIN_TOKEN`).
    #[arg(long, requires = "server")]
    token_file: Option<PathBuf>,
    /// HTTPS: the CAs (PEM) the endpoint's certificate is checked against (default with a
    /// pipeline file: its `admin.tls.certificate`).
    #[arg(long)]
    cacert: Option<PathBuf>,
    /// HTTPS: the client certificate (PEM) an endpoint with `tls.client.ca` asks for.
    #[arg(long, requires = "key")]
    cert: Option<PathBuf>,
    /// HTTPS: the client certificate's key (PEM).
    #[arg(long, requires = "cert")]
    key: Option<PathBuf>,
}

impl ServerArgs {
    /// The HTTPS client configuration, trusting `--cacert` or else `served` (the endpoint's
    /// own certificate file); `None`: plain HTTP.
    fn tls(
        &self,
        served: Option<&Path>,
    ) -> Result<Option<sluice_runtime::admin::ClientTls>, String> {
        let Some(trusted) = self.cacert.as_deref().or(served) else {
            return Ok(None);
        };
        let identity = self.cert.as_deref().zip(self.key.as_deref());
        sluice_runtime::admin::Endpoint::https(trusted, identity)
            .map(Some)
            .map_err(|e| e.to_string())
    }
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    DurationSpec::parse(text).map(|d| d.0)
}

fn parse_bytes(text: &str) -> Result<u64, String> {
    sluice_engine::config::ByteSize::parse(text).map(|b| b.0)
}

fn load(path: &std::path::Path) -> Result<Pipeline, String> {
    let pipeline =
        load_pipeline::<SourceSpec, TransformSpec, SinkSpec>(path).map_err(|e| e.to_string())?;
    // The offset store a component provides checks its own keys.
    registry::check_offsets(&pipeline.offsets).map_err(|error| {
        sluice_engine::config::LoadError::Invalid {
            path: path.to_owned(),
            error,
        }
        .to_string()
    })?;
    Ok(pipeline)
}

fn main() -> ExitCode {
    // Before any thread starts (the environment is the process's).
    #[cfg(feature = "mysql")]
    sluice_sources::mysql::bound_client_buffers();
    let cli = Cli::parse();
    init_tracing();
    match cli.command {
        Command::Validate { pipelines } => validate(&pipelines),
        #[cfg(feature = "sqlite")]
        Command::Capture { action } => match capture::capture(action) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(EXIT_FAILED)
            }
        },
        #[cfg(feature = "sqlite")]
        Command::Quickstart {
            dir,
            fresh,
            seconds,
        } => {
            match quickstart::run(&quickstart::Quickstart {
                dir,
                fresh,
                seconds,
            }) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    ExitCode::from(EXIT_FAILED)
                }
            }
        }
        Command::Serve {
            pipelines,
            bind,
            token_file,
            tls_certificate,
            tls_key,
            tls_client_ca,
            data_dir,
            bootstrap_servers,
            worker_config,
            max_queue_bytes,
            watch_interval,
        } => {
            let serve = serve::Serve {
                pipelines,
                bind,
                token_file,
                tls: (tls_certificate, tls_key, tls_client_ca),
                data_dir,
                bootstrap_servers,
                worker_config,
                max_queue_bytes,
                watch_interval,
            };
            match serve::run(serve) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(EXIT_FAILED)
                }
            }
        }
        Command::Signal {
            pipeline,
            signal,
            server,
        } => send_signal(&pipeline, &server, &signal),
        Command::Status { pipeline, server } => show_status(&pipeline, &server),
        Command::Import {
            connector,
            bootstrap_servers,
        } => import_connector(&connector, &bootstrap_servers),
        Command::Tap {
            pipeline,
            server,
            sink,
            topic,
            limit,
        } => tap(
            (&pipeline, &server),
            sluice_runtime::tap_http::TapRequest { sink, topic, limit },
        ),
        Command::Run {
            pipeline,
            stop_when_idle,
            stop_after_events,
        } => {
            let options = RunOptions {
                stop_after_events,
                stop_when_idle,
                handle_signals: true,
                stop: None,
                progress: progress_view(),
            };
            run(&pipeline, options)
        }
    }
}

/// `sluice validate`: each file loaded and checked.
fn validate(pipelines: &[PathBuf]) -> ExitCode {
    let mut ok = true;
    for path in pipelines {
        match load(path) {
            Ok(p) => println!(
                "{}: ok (pipeline `{}`, {} sink(s))",
                path.display(),
                p.name,
                p.sinks.len()
            ),
            Err(e) => {
                eprintln!("error: {e}");
                ok = false;
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_INVALID)
    }
}

/// The admin endpoint's address, its token and the pipeline's name: from `--server` (the
/// pipeline named, or its file's name) or from a pipeline file's `admin`; or the exit code after
/// the error line (an invalid file; no `admin:`).
fn admin_of(pipeline: &Path, server: &ServerArgs) -> Result<(Endpoint, String), ExitCode> {
    let invalid = |e: String| {
        eprintln!("error: {e}");
        ExitCode::from(EXIT_INVALID)
    };
    if let Some(bind) = &server.server {
        let name = if pipeline.is_file() {
            load(pipeline)
                .map_err(|e| {
                    eprintln!("error: {e}");
                    ExitCode::from(EXIT_INVALID)
                })?
                .name
        } else {
            pipeline.to_string_lossy().into_owned()
        };
        let admin = sluice_runtime::admin::AdminConfig {
            token: std::env::var("SLUICE_ADMIN_TOKEN")
                .ok()
                .map(sluice_engine::config::Secret::from),
            token_file: server.token_file.clone(),
            ..sluice_runtime::admin::AdminConfig::plain(bind)
        };
        let token = admin.token().map_err(invalid)?;
        let tls = server.tls(None).map_err(invalid)?;
        let endpoint = Endpoint {
            bind: bind.clone(),
            token,
            tls,
        };
        return Ok((endpoint, name));
    }
    let config = load(pipeline).map_err(|e| {
        eprintln!("error: {e}");
        ExitCode::from(EXIT_INVALID)
    })?;
    let Some(admin) = &config.admin else {
        eprintln!(
            "error: {}: pipeline `{}` has no admin endpoint: add `admin: {{ bind: \"127.0.0.1:8083\" }}` and restart it",
            pipeline.display(),
            config.name
        );
        return Err(ExitCode::from(EXIT_FAILED));
    };
    let token = admin.token().map_err(|e| {
        eprintln!("error: {}: {e}", pipeline.display());
        ExitCode::from(EXIT_INVALID)
    })?;
    let tls = server
        .tls(admin.tls_certificate.as_deref())
        .map_err(invalid)?;
    let endpoint = Endpoint {
        bind: admin.bind.clone(),
        token,
        tls,
    };
    Ok((endpoint, config.name))
}

/// `sluice status`: a running pipeline's status, from its admin endpoint.
fn show_status(pipeline: &Path, server: &ServerArgs) -> ExitCode {
    let (endpoint, name) = match admin_of(pipeline, server) {
        Ok(found) => found,
        Err(code) => return code,
    };
    match sluice_runtime::admin::status(&endpoint, &name) {
        Ok(status) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&status).unwrap_or_default()
            );
            let ready = status["state"] == "running"
                && status["failing_sinks"]
                    .as_object()
                    .is_none_or(|f| f.is_empty());
            if ready {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_FAILED)
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// `sluice import`: the pipeline file of a Debezium connector's configuration, checked.
fn import_connector(connector: &Path, bootstrap: &str) -> ExitCode {
    let yaml = match import::pipeline(connector, bootstrap) {
        Ok(yaml) => yaml,
        Err(e) => {
            eprintln!("error: {}: {e}", connector.display());
            return ExitCode::from(EXIT_INVALID);
        }
    };
    // Checked as `validate` checks a file, with the `${VAR}`s it reads set to placeholders.
    let mut vars: std::collections::HashMap<String, String> = std::env::vars().collect();
    for part in yaml.split("${").skip(1) {
        let name = part.split(['}', ':']).next().unwrap_or_default();
        vars.entry(name.to_owned())
            .or_insert_with(|| "placeholder".into());
    }
    let checked = sluice_engine::config::parse_pipeline::<SourceSpec, TransformSpec, SinkSpec>(
        Path::new("imported.yaml"),
        &yaml,
        vars,
    );
    if let Err(e) = checked {
        eprintln!(
            "error: {}: the imported pipeline does not validate: {e}",
            connector.display()
        );
        return ExitCode::from(EXIT_INVALID);
    }
    print!("{yaml}");
    ExitCode::SUCCESS
}

/// `sluice tap`: the events a running pipeline's sinks are handed, to stdout.
fn tap(
    (pipeline, server): (&Path, &ServerArgs),
    request: sluice_runtime::tap_http::TapRequest,
) -> ExitCode {
    let (endpoint, name) = match admin_of(pipeline, server) {
        Ok(found) => found,
        Err(code) => return code,
    };
    let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
    let followed =
        sluice_runtime::tap_http::follow(&endpoint, &name, &request, (&mut out, &mut err));
    match followed {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// `sluice signal`: one signal to a running pipeline's admin endpoint.
fn send_signal(pipeline: &Path, server: &ServerArgs, signal: &str) -> ExitCode {
    let (endpoint, name) = match admin_of(pipeline, server) {
        Ok(found) => found,
        Err(code) => return code,
    };
    match sluice_runtime::admin::send_signal(&endpoint, &name, signal) {
        Ok(answer) => {
            println!("{answer}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// `sluice run`: the pipeline until it stops.
fn run(pipeline: &Path, options: RunOptions) -> ExitCode {
    let config = match load(pipeline) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_INVALID);
        }
    };
    let offsets = config.offsets.clone();
    let mut plan = PipelinePlan::from_config(config);
    match registry::offset_store(&offsets) {
        Ok(store) => plan.offset_store = store,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_FAILED);
        }
    }
    match sluice_runtime::run(plan, options) {
        Ok(report) => {
            let committed = report
                .committed
                .map(|p| p.to_string())
                .unwrap_or_else(|| "none".into());
            eprintln!(
                "sluice: stopped; events={} committed={} restarts={}{}",
                report.events,
                committed,
                report.restarts,
                if report.forced { " (forced)" } else { "" }
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// Progress bars when stderr is a terminal, log lines otherwise.
pub(crate) fn progress_view() -> sluice_runtime::metrics::ProgressView {
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        sluice_runtime::metrics::ProgressView::Bars
    } else {
        sluice_runtime::metrics::ProgressView::Log
    }
}

/// Stderr for log lines: written above the progress bars when there are any.
struct LogWriter;

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        sluice_runtime::metrics::progress::suspend(|| std::io::stderr().write(buf))
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        sluice_runtime::metrics::progress::suspend(|| std::io::stderr().write_all(buf))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("SLUICE_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| LogWriter)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}
/// Stages allocate and free each other's events; mimalloc keeps that cheap (glibc malloc
/// contends on its arena locks: measured in `benches/engine.rs`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
