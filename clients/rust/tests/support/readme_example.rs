use signalbus_client::{Client, SendRequest, Signal};
use serde_json::json;

async fn run(url: &str, token: &str) -> signalbus_client::Result<()> {
    let bot = Client::builder(url, token).kind("daemon").spool_dir("./signalbus-spool")
        .on_signal(|sig: Signal, me: Client| async move {            // acked after Ok(())
            if sig.signal_type == "Question" { me.reply(&sig, "Answer", json!({"a": 42})).await?; }
            Ok(())
        })
        .build()?;
    bot.connect().await?;                                              // welcome: identity, session_id
    bot.send(SendRequest::new("alice", "StatusUpdate").payload(json!({"build": "green"}))).await?;
    std::future::pending::<()>().await;                                // serve until cancelled
    Ok(())
}
