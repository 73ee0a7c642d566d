//! One typed check model, parsed once. Where a check enters (a manifest the embedded hub
//! loads, `eval`'s MemberCluster, the config an agent receives, a hub-side check) the
//! CRD's [`ClusterCheck`], one `Option` per kind, becomes a [`Check`]: its phase, its
//! timing with every default applied, where it runs, and exactly one [`Kind`]. The engines
//! take `Check`s and never look at a `ClusterCheck` again.
//!
//! Every rule the structural schema cannot state is checked here and nowhere else: one
//! kind, `for` or `duration`, a header's `value` or `valueFrom`, selectors that parse, CEL
//! rules and Lua that compile, a check that reads either the hub or the cluster. The
//! structural rules (the name a DNS label, minimums, lengths) are the schema's, generated
//! from the same types and applied by the API server or, for the embedded hub and `eval`,
//! by [`crate::api::schema`]. The CRD states the one-kind and `for`/`duration` rules again
//! as CEL, for the API server; a test evaluates those rules beside [`Check::parse`] and
//! fails when the two disagree.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use super::lua_batch::{LuaCheck, Script};
use super::timing::Timing;
use super::validate::ValidationError;
use crate::api::{
    CheckKind, CheckPhase, ClusterCheck, HttpProbe, PodCheck, ReadyNodesCheck, ReadyPodsCheck,
    TcpProbe,
};

/// A check as the engines run it.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// Name, unique within the cluster's checks.
    pub name: String,
    /// Which condition it gates.
    pub phase: CheckPhase,
    /// Period, timeout, thresholds and `for`, defaults applied.
    pub timing: Timing,
    /// Who evaluates it.
    pub runs_on: RunsOn,
    /// What it runs.
    pub kind: Kind,
}

/// Who evaluates a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunsOn {
    /// The agent, over its cluster's objects (every check but the ones below).
    Agent,
    /// The hub, over its own objects: a Lua check whose selectors say `fromHub`.
    Hub,
}

/// What a check runs: exactly one kind.
#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    /// Lua over resources: a Sveltos `condition` or an Argo CD `healthScript`. Shared, so
    /// a round takes a handle, never a copy.
    Lua(Arc<LuaCheck>),
    /// A pod run from a template on a schedule.
    Pod(Box<PodCheck>),
    /// An HTTP probe.
    Http(HttpProbe),
    /// A TCP probe.
    Tcp(TcpProbe),
    /// A minimum of Ready nodes.
    ReadyNodes(ReadyNodesCheck),
    /// A minimum of Ready pods.
    ReadyPods(ReadyPodsCheck),
}

impl Kind {
    /// The kind as reports name it.
    pub fn reported(&self) -> CheckKind {
        match self {
            Kind::Lua(_) => CheckKind::Lua,
            Kind::Pod(_) => CheckKind::Pod,
            Kind::Http(_) => CheckKind::Http,
            Kind::Tcp(_) => CheckKind::Tcp,
            Kind::ReadyNodes(_) => CheckKind::ReadyNodes,
            Kind::ReadyPods(_) => CheckKind::ReadyPods,
        }
    }
}

fn err(field: impl Into<String>, problem: impl Into<String>) -> ValidationError {
    ValidationError {
        field: field.into(),
        problem: problem.into(),
    }
}

/// The kinds a check can set, as the CRD names them.
const KINDS: &str =
    "condition (Lua), healthScript (Argo CD), pod, http, tcp, readyNodes or readyPods";

impl Check {
    /// Parses `spec`, an entry of `phase`'s list at JSON path `path` (which prefixes the
    /// field of an error, e.g. `spec.livenessChecks[0]`).
    pub fn parse(
        spec: &ClusterCheck,
        phase: CheckPhase,
        path: &str,
    ) -> Result<Check, ValidationError> {
        compiles(spec, path)?;
        Check::read(spec, phase, path)
    }

    /// [`Check::parse`] but for compiling the Lua: for a check whose object was admitted
    /// after [`compiles`] passed (the hub's hub-side checks, read again for every cluster
    /// a HealthPolicy selects), so no source is compiled once per cluster.
    pub fn read(
        spec: &ClusterCheck,
        phase: CheckPhase,
        path: &str,
    ) -> Result<Check, ValidationError> {
        let timing = timing(spec, path)?;
        let kind = kind(spec, path, &timing)?;
        let runs_on = match spec.reads_hub() {
            true => RunsOn::Hub,
            false => RunsOn::Agent,
        };
        Ok(Check {
            name: spec.name.clone(),
            phase,
            timing,
            runs_on,
            kind,
        })
    }

    /// Parses a readiness and a liveness list, whose names must be unique across both.
    pub fn parse_lists(
        readiness: &[ClusterCheck],
        liveness: &[ClusterCheck],
    ) -> Result<Vec<Check>, ValidationError> {
        let mut names = HashSet::new();
        let lists = [
            (CheckPhase::Readiness, "spec.readinessChecks", readiness),
            (CheckPhase::Liveness, "spec.livenessChecks", liveness),
        ];
        let mut checks = Vec::with_capacity(readiness.len() + liveness.len());
        for (phase, list, specs) in lists {
            for (i, spec) in specs.iter().enumerate() {
                let path = format!("{list}[{i}]");
                let check = Check::parse(spec, phase, &path)?;
                if !names.insert(spec.name.as_str()) {
                    return Err(err(
                        format!("{path}.name"),
                        format!(
                            "check name {:?} is used twice; names must be unique",
                            spec.name
                        ),
                    ));
                }
                checks.push(check);
            }
        }
        Ok(checks)
    }

    /// The Lua part, for a Lua check.
    pub fn lua(&self) -> Option<&Arc<LuaCheck>> {
        match &self.kind {
            Kind::Lua(lua) => Some(lua),
            _ => None,
        }
    }
}

fn timing(spec: &ClusterCheck, path: &str) -> Result<Timing, ValidationError> {
    let for_ = match (&spec.for_, &spec.duration) {
        (Some(_), Some(_)) => {
            return Err(err(
                path,
                "`for` and `duration` mean the same; set only one",
            ));
        }
        (Some(v), None) => Some(("for", v)),
        (None, Some(v)) => Some(("duration", v)),
        (None, None) => None,
    };
    let for_duration = match for_ {
        Some((field, v)) => {
            crate::duration::parse(v).map_err(|e| err(format!("{path}.{field}"), e))?
        }
        None => Duration::ZERO,
    };
    let seconds = |s: Option<u32>| s.map(|s| Duration::from_secs(s.into()));
    Ok(Timing {
        period: seconds(spec.period_seconds),
        timeout: seconds(spec.timeout_seconds),
        failure_threshold: spec.failure_threshold.unwrap_or(1).max(1),
        success_threshold: spec.success_threshold.unwrap_or(1).max(1),
        for_duration,
    })
}

fn kind(spec: &ClusterCheck, path: &str, timing: &Timing) -> Result<Kind, ValidationError> {
    let count = spec.kinds().len();
    let one_kind = || {
        err(
            path,
            format!("set exactly one check kind: {KINDS} (found {count})"),
        )
    };
    if count > 1 {
        return Err(one_kind());
    }
    let script = match (&spec.condition, &spec.health_script) {
        (Some(source), _) => Some(Script::Condition(source.clone())),
        (None, Some(source)) => Some(Script::Health(source.clone())),
        (None, None) => None,
    };
    if let Some(script) = script {
        return lua(spec, script, path, timing).map(|l| Kind::Lua(Arc::new(l)));
    }
    Ok(if let Some(pod) = &spec.pod {
        Kind::Pod(Box::new(pod.clone()))
    } else if let Some(http) = &spec.http {
        headers(http, path)?;
        Kind::Http(http.clone())
    } else if let Some(tcp) = &spec.tcp {
        Kind::Tcp(tcp.clone())
    } else if let Some(nodes) = &spec.ready_nodes {
        Kind::ReadyNodes(nodes.clone())
    } else if let Some(pods) = &spec.ready_pods {
        Kind::ReadyPods(pods.clone())
    } else {
        return Err(one_kind());
    })
}

fn lua(
    spec: &ClusterCheck,
    script: Script,
    path: &str,
    timing: &Timing,
) -> Result<LuaCheck, ValidationError> {
    let selectors = &spec.resource_selectors;
    if selectors.iter().any(|s| s.from_hub) && selectors.iter().any(|s| !s.from_hub) {
        return Err(err(
            format!("{path}.resourceSelectors"),
            "a check reads either the hub (fromHub: true) or the managed cluster; split it into two checks",
        ));
    }
    if matches!(script, Script::Health(_)) && selectors.is_empty() {
        return Err(err(
            format!("{path}.resourceSelectors"),
            "a healthScript check runs its script for every selected object; add resourceSelectors naming the objects (e.g. group, version and kind)",
        ));
    }
    for (i, selector) in selectors.iter().enumerate() {
        let at = format!("{path}.resourceSelectors[{i}]");
        if let Some(spec) = &selector.selector {
            super::labels::LabelQuery::of(spec)
                .map_err(|e| err(format!("{at}.selector"), e.to_string()))?;
        }
        for (j, rule) in selector.evaluate_cel.iter().enumerate() {
            super::cel::compile(rule)
                .map_err(|e| err(format!("{at}.evaluateCEL[{j}].rule"), e.to_string()))?;
        }
    }
    Ok(LuaCheck {
        name: spec.name.clone(),
        script,
        selectors: selectors.clone(),
        deadline: timing.timeout,
    })
}

/// Whether every Lua source of `spec` (its `condition` or `healthScript`, its selectors'
/// `evaluate`) compiles; the error names the field, the check and the line. What the hub
/// checks of every object it admits in Kubernetes mode, where the API server has checked
/// the rest.
pub fn compiles(spec: &ClusterCheck, path: &str) -> Result<(), ValidationError> {
    let scripts = [
        ("condition", &spec.condition),
        ("healthScript", &spec.health_script),
    ];
    let scripts = scripts
        .into_iter()
        .filter_map(|(field, source)| Some((format!("{path}.{field}"), source.as_deref()?)));
    let filters = spec
        .resource_selectors
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let at = format!("{path}.resourceSelectors[{i}].evaluate");
            Some((at, s.evaluate.as_deref()?))
        });
    for (at, source) in scripts.chain(filters) {
        crate::lua::compile_check(&spec.name, source).map_err(|e| err(at, e.to_string()))?;
    }
    Ok(())
}

fn headers(http: &HttpProbe, path: &str) -> Result<(), ValidationError> {
    for (i, header) in http.http_headers.iter().enumerate() {
        if header.value.is_some() == header.value_from.is_some() {
            return Err(err(
                format!("{path}.http.httpHeaders[{i}]"),
                format!(
                    "header {:?}: set exactly one of value and valueFrom.secretKeyRef \
                     (a Secret of the managed cluster, for credentials)",
                    header.name
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
