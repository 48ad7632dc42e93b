//! Auto-pinning (SPEC §6): a decayed count of each user's successful calls to grouped tools,
//! and the hot set the model sees in `GetModelTools`.

use super::Router;
use super::execute::Invocation;
use crate::admission::CallContext;
use crate::catalog::Catalog;
use crate::error::Result;

impl Router {
    /// The run's hot tools: frozen at its first `GetModelTools` (a run without an id, or
    /// without auto-pinning, has none to freeze).
    pub(super) async fn frozen_hot_tools(&self, cx: &CallContext, catalog: &Catalog) -> Result<Vec<u32>> {
        let active = catalog.control.auto_pin.is_some() && self.config.auto_pin && cx.run.user().is_some();
        if !active || cx.run.run_id.is_empty() {
            return self.hot_tools(cx, catalog).await;
        }
        let store = self.registry.store();
        let names = match store.run_hot(&cx.tenant, &cx.agent_id, &cx.run.run_id).await? {
            Some(frozen) => frozen,
            None => {
                let hot = self.hot_tools(cx, catalog).await?;
                let names: Vec<&str> = hot.iter().map(|&i| catalog.tool(i).name.as_str()).collect();
                let text = serde_json::to_string(&names).unwrap_or_else(|_| "[]".into());
                // Another request of the run may have frozen it first: that list wins.
                store.freeze_run_hot(&cx.tenant, &cx.agent_id, &cx.run.run_id, &text).await?.unwrap_or(text)
            }
        };
        let names: Vec<String> = serde_json::from_str(&names).unwrap_or_default();
        Ok(names.iter().filter_map(|n| catalog.by_canonical(n)).collect())
    }

    /// The user's hot tools: at least `warmup_calls` (decayed) calls, the top `max_hot`.
    pub(super) async fn hot_tools(&self, cx: &CallContext, catalog: &Catalog) -> Result<Vec<u32>> {
        let (Some(cfg), true, Some(user)) = (catalog.control.auto_pin, self.config.auto_pin, cx.run.user()) else {
            return Ok(Vec::new());
        };
        let usage = self.registry.store().usage(&cx.tenant, &cx.agent_id, user, self.now(), cfg.half_life.as_millis() as i64).await?;
        Ok(usage
            .into_iter()
            // The count decays from the moment it is recorded, so `warmup_calls` calls made
            // minutes apart sum to slightly less than `warmup_calls`: compare the count rounded
            // to whole calls (a tool stays hot until it decays below warmup − ½).
            .filter(|(_, score)| *score + 0.5 >= cfg.warmup_calls as f64)
            .filter_map(|(name, _)| catalog.by_canonical(&name))
            .filter(|i| !catalog.tool(*i).pin)
            .take(cfg.max_hot as usize)
            .collect())
    }

    /// Counts a successful call of a grouped tool for its user, off the call path.
    pub(super) fn count_use(&self, inv: &Invocation<'_>) {
        let tool = inv.catalog.tool(inv.tool);
        let (Some(cfg), true, Some(user), true) = (inv.catalog.control.auto_pin, self.config.auto_pin, inv.run.user(), tool.group.is_some()) else {
            return;
        };
        let store = self.registry.store().clone();
        let (tenant, agent, user, name) = (inv.tenant.to_string(), inv.agent_id.to_string(), user.to_string(), tool.name.clone());
        let now = self.now();
        // A lost count only delays a tool becoming hot.
        tokio::spawn(async move {
            if let Err(e) = store.record_use(&tenant, &agent, &user, &name, now, cfg.half_life.as_millis() as i64).await {
                tracing::warn!(error = %e, "auto-pin count not recorded");
            }
        });
    }
}
