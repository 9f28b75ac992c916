//! mini-redis's server and client in one process: `REQUESTS` SET and GET commands over
//! one connection, every `#[instrument]` span of mini-redis's own code recorded by the
//! subscriber named by the first argument: `gapscope` (the gapscope-tracing layer),
//! `chrome` (tracing-chrome, to a file in the temporary folder), `registry`
//! (tracing-subscriber's registry with no layer: what every layer's spans cost before
//! the layer's own work) or `none` (spans disabled).

use tracing_subscriber::prelude::*;

const REQUESTS: usize = 2000;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> mini_redis::Result<()> {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "gapscope".into());
    let _chrome_guard = match mode.as_str() {
        "gapscope" => {
            tracing::subscriber::set_global_default(
                tracing_subscriber::registry().with(gapscope_tracing::layer()),
            )?;
            None
        }
        "chrome" => {
            let path = std::env::temp_dir().join(format!("mini-redis-{}.json", std::process::id()));
            let (layer, guard) = tracing_chrome::ChromeLayerBuilder::new().file(path).build();
            tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))?;
            Some(guard)
        }
        "registry" => {
            tracing::subscriber::set_global_default(tracing_subscriber::registry())?;
            None
        }
        "none" => None,
        other => {
            return Err(format!("unknown mode {other:?}: gapscope, chrome, registry or none").into())
        }
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(mini_redis::server::run(listener, stopped));
    let mut client = mini_redis::client::connect(addr).await?;
    for i in 0..REQUESTS {
        let key = format!("key{i}");
        client.set(&key, bytes::Bytes::from("value")).await?;
        let got = client.get(&key).await?;
        assert_eq!(got.as_deref(), Some(&b"value"[..]));
    }
    drop(client);
    let _ = stop.send(());
    server.await??;
    Ok(())
}
