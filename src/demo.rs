//! The demo CRM executor of the README walk-through: a real `ToolExecutor` gRPC server.

use std::net::SocketAddr;

use serde_json::{Value, json};
use tonic::{Request, Response, Status};

use crate::pb;
use crate::pb::tool_executor_server::{ToolExecutor, ToolExecutorServer};

#[derive(Debug, Default, Clone)]
pub struct DemoExecutor;

fn customers() -> [(i64, &'static str); 3] {
    [(42, "Ada"), (7, "Grace"), (1, "Alan")]
}

#[tonic::async_trait]
impl ToolExecutor for DemoExecutor {
    async fn execute(&self, req: Request<pb::ExecuteRequest>) -> Result<Response<pb::ExecuteResponse>, Status> {
        let r = req.into_inner();
        let args: Value = serde_json::from_str(&r.arguments_json).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let id = args.get("customer_id").and_then(Value::as_i64);
        let (content, is_error) = match r.tool.as_str() {
            "customer_name" => match customers().iter().find(|(c, _)| Some(*c) == id) {
                Some((_, name)) => (json!(name), false),
                None => (json!("Unknown"), false),
            },
            "refund_payment" => {
                let amount = args.get("amount").cloned().unwrap_or(Value::Null);
                (json!({"refunded": amount, "customer_id": id, "status": "done"}), false)
            }
            other => (json!({"error": format!("unknown tool {other}")}), true),
        };
        Ok(Response::new(pb::ExecuteResponse { content_json: content.to_string(), is_error }))
    }

    async fn list_tools(&self, _req: Request<pb::ListToolsRequest>) -> Result<Response<pb::ListToolsResponse>, Status> {
        Ok(Response::new(pb::ListToolsResponse {
            tools: vec![pb::ToolDeclaration {
                name: "customer_name".into(),
                description: "Look up the display name for a customer ID.".into(),
                input_schema_json: r#"{"type":"object","properties":{"customer_id":{"type":"integer","description":"Numeric customer ID"}},"required":["customer_id"]}"#.into(),
                idempotent: true,
                ..Default::default()
            }, pb::ToolDeclaration {
                name: "refund_payment".into(),
                description: "Refund an amount to a customer's original payment method.".into(),
                input_schema_json: r#"{"type":"object","properties":{"customer_id":{"type":"integer"},"amount":{"type":"number","exclusiveMinimum":0}},"required":["customer_id","amount"]}"#.into(),
                requires_approval: true,
                ..Default::default()
            }],
        }))
    }
}

/// Serves the demo executor until the process ends.
pub async fn serve(addr: SocketAddr) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!("demo executor listening on {}", listener.local_addr()?);
    tonic::transport::Server::builder()
        .add_service(ToolExecutorServer::new(DemoExecutor))
        .serve_with_incoming_shutdown(tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)), async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
