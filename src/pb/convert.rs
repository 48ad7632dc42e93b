//! Conversions of the messages shared by the server API and the executor client: tool
//! declarations, run contexts, durations and timestamps.

use std::time::Duration;

use crate::call::{Caller, RunContext};
use crate::catalog::ToolDeclaration;
use crate::error::{Error, FieldViolation};
use crate::pb;

type Violations = Vec<FieldViolation>;

pub fn duration(d: &Option<prost_types::Duration>, field: &str, v: &mut Violations) -> Option<Duration> {
    let d = d.as_ref()?;
    // Nanos past a second are malformed (google.protobuf.Duration) and would carry into
    // seconds that may no longer fit the i64 the API answers with.
    if d.nanos >= 1_000_000_000 {
        v.push(FieldViolation::new(field, "nanos must be below 1000000000"));
        return None;
    }
    if d.seconds < 0 || d.nanos < 0 || (d.seconds == 0 && d.nanos == 0) {
        v.push(FieldViolation::new(field, "a duration must be positive"));
        return None;
    }
    Some(Duration::new(d.seconds as u64, d.nanos as u32))
}

pub fn pb_duration(d: Option<Duration>) -> Option<prost_types::Duration> {
    d.map(|d| prost_types::Duration { seconds: d.as_secs() as i64, nanos: d.subsec_nanos() as i32 })
}

pub fn timestamp(ms: i64) -> prost_types::Timestamp {
    prost_types::Timestamp { seconds: ms.div_euclid(1000), nanos: (ms.rem_euclid(1000) * 1_000_000) as i32 }
}

fn tool_decl(t: pb::ToolDeclaration, path: &str, v: &mut Violations) -> ToolDeclaration {
    ToolDeclaration {
        timeout: duration(&t.timeout, &format!("{path}.timeout"), v),
        name: t.name,
        description: t.description,
        input_schema: t.input_schema_json,
        output_schema: t.output_schema_json,
        requires_approval: t.requires_approval,
        idempotent: t.idempotent,
        codeact_callable: t.codeact_callable,
    }
}

pub fn tool_decls(tools: Vec<pb::ToolDeclaration>, path: &str, v: &mut Violations) -> Vec<ToolDeclaration> {
    tools.into_iter().enumerate().map(|(i, t)| tool_decl(t, &format!("{path}.tools[{i}]"), v)).collect()
}

pub fn pb_tool_decl(t: &ToolDeclaration) -> pb::ToolDeclaration {
    pb::ToolDeclaration {
        name: t.name.clone(),
        description: t.description.clone(),
        input_schema_json: t.input_schema.clone(),
        output_schema_json: t.output_schema.clone(),
        requires_approval: t.requires_approval,
        idempotent: t.idempotent,
        codeact_callable: t.codeact_callable,
        timeout: pb_duration(t.timeout),
    }
}

pub fn run_context(r: Option<pb::RunContext>) -> Result<RunContext, Error> {
    let r = r.unwrap_or_default();
    if r.run_id.len() > 256 {
        return Err(Error::invalid("run.run_id", "at most 256 bytes"));
    }
    let caller = match pb::Caller::try_from(r.caller) {
        Ok(pb::Caller::Model) => Caller::Model,
        Ok(pb::Caller::Code) => Caller::Code,
        Err(_) => return Err(Error::invalid("run.caller", "unknown caller")),
    };
    Ok(RunContext { run_id: r.run_id, identity: r.identity.into_iter().collect(), attributes: r.attributes.into_iter().collect(), caller })
}

pub fn pb_run_context(r: &RunContext) -> pb::RunContext {
    pb::RunContext {
        run_id: r.run_id.clone(),
        identity: r.identity.clone().into_iter().collect(),
        attributes: r.attributes.clone().into_iter().collect(),
        caller: match r.caller {
            Caller::Model => pb::Caller::Model,
            Caller::Code => pb::Caller::Code,
        } as i32,
    }
}
