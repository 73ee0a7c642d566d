//! The chart-test tools: finding helm and kubernetes-validate (installed into `.tools/` by
//! `scripts/install-chart-tools.sh`), rendering a chart, turning the rendered YAML into
//! JSON values, and validating manifests against Kubernetes' schemas.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

/// The command that installs the tools.
pub const INSTALL: &str = "bash scripts/install-chart-tools.sh";
/// Namespace every chart is rendered into.
pub const NAMESPACE: &str = "fleetpulse-system";
/// Release name every chart is rendered as.
pub const RELEASE: &str = "fp";
/// Kubernetes versions manifests are validated against: the oldest the charts support
/// (their `kubeVersion`) and the newest kubernetes-validate ships schemas for.
pub const KUBERNETES_VERSIONS: &[&str] = &["1.29.0", "1.37.0"];
/// Kinds from CRDs (cert-manager, Prometheus Operator) kubernetes-validate has no schema
/// for; they only draw a warning, and the tests check their shape themselves.
pub const KINDS_WITHOUT_SCHEMA: &[&str] = &["Certificate", "ServiceMonitor", "PrometheusRule"];

/// One of the two charts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chart {
    /// `charts/fleetpulse-hub`.
    Hub,
    /// `charts/fleetpulse-agent`.
    Agent,
}

impl Chart {
    /// The chart's name.
    pub fn name(self) -> &'static str {
        match self {
            Chart::Hub => "fleetpulse-hub",
            Chart::Agent => "fleetpulse-agent",
        }
    }

    /// The chart's directory, relative to the repository root.
    pub fn dir(self) -> String {
        format!("charts/{}", self.name())
    }

    /// The full name of the release's objects (`<release>-<chart>`).
    pub fn fullname(self) -> String {
        format!("{RELEASE}-{}", self.name())
    }

    /// The value sets a chart is tested with: for the hub its defaults, then every
    /// `ci/*-values.yaml` (the agent has required values, so only its `ci/` files).
    pub fn value_sets(self) -> Vec<(String, Vec<String>)> {
        let mut sets = Vec::new();
        if self == Chart::Hub {
            sets.push(("defaults".to_owned(), Vec::new()));
        }
        let dir = repo_root().join(self.dir()).join("ci");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with("-values.yaml"))
            .collect();
        files.sort();
        for file in files {
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            sets.push((name, vec!["-f".to_owned(), file.display().to_string()]));
        }
        sets
    }
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the repository")
        .to_path_buf()
}

/// Paths of the tools.
#[derive(Debug)]
pub struct Tools {
    /// helm.
    pub helm: PathBuf,
    /// kubernetes-validate.
    pub validate: PathBuf,
    /// The Python kubernetes-validate runs on (it has PyYAML, used to read rendered YAML).
    pub python: PathBuf,
}

/// The tools, found once; panics naming the install command when one is missing.
pub fn tools() -> &'static Tools {
    static TOOLS: OnceLock<Tools> = OnceLock::new();
    TOOLS.get_or_init(|| {
        let root = repo_root();
        let helm = locate("FLEETPULSE_HELM", root.join(".tools/bin/helm"), "helm");
        let validate = locate(
            "FLEETPULSE_KUBERNETES_VALIDATE",
            root.join(".tools/bin/kubernetes-validate"),
            "kubernetes-validate",
        );
        // A virtualenv's console script sits beside the environment's Python.
        let resolved = std::fs::canonicalize(&validate).unwrap_or_else(|_| validate.clone());
        let python = ["python", "python3"]
            .iter()
            .map(|name| resolved.with_file_name(name))
            .find(|p| p.is_file())
            .unwrap_or_else(|| {
                panic!(
                    "no python beside {} (the chart tests read YAML with the PyYAML that \
                     kubernetes-validate brings); install the tools with `{INSTALL}`",
                    resolved.display()
                )
            });
        Tools {
            helm,
            validate,
            python,
        }
    })
}

fn locate(env: &str, default: PathBuf, what: &str) -> PathBuf {
    let path = std::env::var_os(env).map_or(default, PathBuf::from);
    assert!(
        path.is_file(),
        "{what} not found at {} (or set {env}): install the chart test tools with `{INSTALL}` \
         from the repository root",
        path.display()
    );
    path
}

fn run(program: &Path, args: &[String], stdin: Option<&str>) -> Output {
    let mut child = Command::new(program)
        .args(args)
        .current_dir(repo_root())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}; try `{INSTALL}`", program.display()));
    if let Some(input) = stdin {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    child.wait_with_output().unwrap()
}

/// Runs helm with `args` in the repository root.
pub fn helm(args: &[String]) -> Output {
    run(&tools().helm, args, None)
}

/// Strings from string slices, for argument lists.
pub fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

/// `helm template` of `chart` (CRDs included) with `extra` arguments: the manifests, or
/// helm's error output.
pub fn template(chart: Chart, extra: &[String]) -> Result<String, String> {
    let mut args = strings(&["template", RELEASE]);
    args.push(chart.dir());
    args.extend(strings(&["--namespace", NAMESPACE, "--include-crds"]));
    args.extend(extra.iter().cloned());
    let out = helm(&args);
    if out.status.success() {
        Ok(String::from_utf8(out.stdout).unwrap())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Like [`template`], panicking with helm's message on failure.
pub fn render(chart: Chart, extra: &[String]) -> String {
    template(chart, extra)
        .unwrap_or_else(|e| panic!("helm template {} {extra:?} failed:\n{e}", chart.name()))
}

/// The documents of a YAML stream as JSON values (empty documents dropped).
pub fn documents(yaml: &str) -> Vec<Value> {
    let script = "import json, sys, yaml\n\
                  docs = [d for d in yaml.safe_load_all(sys.stdin) if d is not None]\n\
                  json.dump(docs, sys.stdout)\n";
    let out = run(
        &tools().python,
        &["-c".to_owned(), script.to_owned()],
        Some(yaml),
    );
    assert!(
        out.status.success(),
        "reading rendered YAML failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Validates a YAML stream with `kubernetes-validate --strict` against `version`; returns
/// its warnings, or its complaints.
pub fn validate(yaml: &str, version: &str) -> Result<Vec<String>, String> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("manifests.yaml");
    std::fs::write(&file, yaml).unwrap();
    let args = vec![
        "--strict".to_owned(),
        "--kubernetes-version".to_owned(),
        version.to_owned(),
        file.display().to_string(),
    ];
    let out = run(&tools().validate, &args, None);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let problems: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with("INFO ") && !l.starts_with("WARN "))
        .filter(|l| !l.trim().is_empty())
        .collect();
    if out.status.success() && problems.is_empty() {
        Ok(text
            .lines()
            .filter(|l| l.starts_with("WARN "))
            .map(str::to_owned)
            .collect())
    } else {
        Err(text)
    }
}

/// The objects of `kind` among `docs`.
pub fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

/// The one object of `kind` among `docs`.
pub fn one<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    let found = of_kind(docs, kind);
    assert_eq!(found.len(), 1, "expected one {kind}, found {}", found.len());
    found[0]
}

/// Arguments for the agent chart's least values (`ci/minimal-values.yaml`).
pub const AGENT_MINIMAL: &[&str] = &["-f", "charts/fleetpulse-agent/ci/minimal-values.yaml"];

/// Every chart rendered with every value set: (chart, value set name, manifests).
pub fn every_rendering() -> Vec<(Chart, String, String)> {
    [Chart::Hub, Chart::Agent]
        .into_iter()
        .flat_map(|chart| {
            chart
                .value_sets()
                .into_iter()
                .map(move |(name, args)| (chart, name, render(chart, &args)))
        })
        .collect()
}

/// The container `name` of a Deployment.
pub fn container<'a>(deployment: &'a Value, name: &str) -> &'a Value {
    deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no container {name}"))
}
