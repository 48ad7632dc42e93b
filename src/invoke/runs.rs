//! Runs (SPEC §8): the first call of a run pins the definition version it sees, later calls
//! keep it; `EndRun` releases the pin, the run's MCP sessions and its place in the tenant's
//! run quota (one path, whichever edge ended the run); idle runs expire.

use std::sync::Arc;

use super::{Router, surface};
use crate::admission::{CallContext, RequestContext};
use crate::catalog::Catalog;
use crate::control::{self, ModelTool};
use crate::error::{Error, Result};
use crate::provider::Format;

/// The version a call resolved to, and its catalog.
#[derive(Clone)]
pub struct Resolved {
    pub version: u32,
    pub catalog: Arc<Catalog>,
}

/// `GetModelTools`: the model's tools for a run, and what the host should know.
#[derive(Debug, Clone)]
pub struct ModelTools {
    pub version: u32,
    pub tools: Vec<ModelTool>,
    pub instructions: String,
    pub diagnostics: Vec<String>,
    /// With a format: the provider's tools parameter.
    pub tools_json: String,
    /// The same request gets the same list for as long as the run lives: a version fixed
    /// by the request (named, or the run's pin), no MCP source whose listing may change, no
    /// hot set that moves with usage. Otherwise a promotion or a listing can change it.
    pub stable: bool,
}

/// How the host wants the tools: in a provider's shape, and with native deferred loading.
#[derive(Debug, Clone, Copy, Default)]
pub struct ToolsView {
    pub format: Option<Format>,
    pub defer_loading: bool,
}

impl Router {
    /// The version and catalog of a call: a run keeps the version its first call pinned.
    pub async fn resolve(&self, cx: &CallContext) -> Result<Resolved> {
        let (tenant, agent_id, run) = (cx.tenant.as_str(), cx.agent_id.as_str(), &cx.run);
        let version = if run.run_id.is_empty() {
            self.registry.resolve_version(tenant, agent_id, cx.version).await?
        } else {
            let pinned = self.registry.pin_run(tenant, agent_id, cx.version, &run.run_id, self.config.run_idle).await?;
            if cx.version != 0 && pinned != cx.version {
                return Err(Error::FailedPrecondition(format!(
                    "run {:?} is pinned to version {pinned}; start a new run to use version {}",
                    run.run_id, cx.version
                )));
            }
            pinned
        };
        let catalog = self.registry.catalog_for_run(tenant, agent_id, version, run).await?;
        Ok(Resolved { version, catalog })
    }

    /// `GetModelTools`: the tools and instructions for this run (hot tools per user). The
    /// list is frozen for a run from its first `GetModelTools`: the hot set is stored with the
    /// run, so providers' prompt caches stay warm; usage changes it for later runs.
    pub async fn model_tools(&self, cx: &CallContext) -> Result<ModelTools> {
        self.model_tools_as(cx, ToolsView::default()).await
    }

    /// `GetModelTools` with a view: the typed tools, and `tools_json` in the provider's shape
    /// (schemas adapted once per version, so the same run gets the same bytes).
    pub async fn model_tools_as(&self, cx: &CallContext, view: ToolsView) -> Result<ModelTools> {
        if view.defer_loading && !view.format.is_some_and(Format::defers_loading) {
            return Err(Error::invalid("defer_loading", "deferred loading needs format TOOL_FORMAT_ANTHROPIC or TOOL_FORMAT_OPENAI_RESPONSES"));
        }
        let r = self.resolve(cx).await?;
        let hot = self.frozen_hot_tools(cx, &r.catalog).await?;
        let (tools, instructions) = control::model_tools(&r.catalog, &hot);
        let mut diagnostics = r.catalog.diagnostics.clone();
        let tools_json = match view.format {
            None => String::new(),
            Some(format) => {
                let rendered = surface::render_tools(&r.catalog, &tools, format, view.defer_loading);
                diagnostics.extend(rendered.diagnostics);
                rendered.json
            }
        };
        let version_fixed = cx.version != 0 || !cx.run.run_id.is_empty();
        let hot_moves = r.catalog.control.auto_pin.is_some() && self.config.auto_pin && cx.run.user().is_some() && cx.run.run_id.is_empty();
        let stable = version_fixed && !hot_moves && !r.catalog.has_mcp_sources();
        Ok(ModelTools { version: r.version, tools, instructions, diagnostics, tools_json, stable })
    }

    /// Is `run_id` a live run of the agent (an MCP session opened on any replica)?
    pub async fn run_is_live(&self, tenant: &str, agent_id: &str, run_id: &str) -> Result<bool> {
        let idle_since = self.now() - self.config.run_idle.as_millis() as i64;
        Ok(self.registry.store().run_version(tenant, agent_id, run_id, idle_since).await?.is_some())
    }

    /// `EndRun` (and an MCP client closing its session): the run's next call pins the default
    /// version again and counts as a new run; its MCP sessions upstream are closed.
    pub async fn end_run(&self, rq: &RequestContext, agent_id: &str, run_id: &str) -> Result<()> {
        if run_id.is_empty() {
            return Err(Error::invalid("run_id", "name the run to end"));
        }
        let tenant = rq.tenant.as_str();
        self.registry.resolve_version(tenant, agent_id, 0).await?;
        self.registry.end_run(tenant, agent_id, run_id).await?;
        self.upstream.end_run(tenant, agent_id, run_id);
        self.admission.run_ended(tenant, agent_id, run_id);
        Ok(())
    }
}
