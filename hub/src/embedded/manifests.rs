//! Reads MemberCluster, ClusterSet, Set and HealthPolicy manifests from a directory
//! (recursively; `.yaml`, `.yml`, `.json`; multi-document YAML), validating each object as
//! the API server would. Objects of other APIs (e.g. KeptnMetric) are kept as the data
//! hub-side checks (`fromHub` selectors) read.
//!
//! Rescanning only re-reads files whose size or modification time changed. A file that
//! fails to parse or validate keeps contributing its last good objects, and the error names
//! the file, the document and the fix, so a bad edit never drops clusters from the hub.
//! A file that has failed since this process started has no good version to keep:
//! [`ManifestDir::unloaded`] lists those, and the hub does not become ready while any
//! remains (its clusters' agents would otherwise be refused as unknown and its sets
//! reselected).

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use serde::Deserialize;

use fleetpulse_common::api::{API_VERSION, ClusterSet, HealthPolicy, MemberCluster, Set};

use crate::fleet::Objects;

/// A manifest problem, for the operator.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("{file}{}: {problem}", document.map(|d| format!(" (document {d})")).unwrap_or_default())]
pub struct ManifestError {
    /// The file.
    pub file: PathBuf,
    /// 1-based document number within the file, when it applies.
    pub document: Option<usize>,
    /// What is wrong and how to fix it.
    pub problem: String,
}

#[derive(Clone, Debug, Default)]
struct FileObjects {
    stamp: Option<(SystemTime, u64)>,
    objects: Objects,
    /// Whether a version of the file loaded in this process (`objects` is it).
    loaded: bool,
    /// Why the file's current version does not load.
    failing: Option<ManifestError>,
}

/// A watched manifest directory.
#[derive(Debug)]
pub struct ManifestDir {
    dir: PathBuf,
    files: BTreeMap<PathBuf, FileObjects>,
}

/// The result of a scan.
#[derive(Debug, Default)]
pub struct Scan {
    /// Whether anything changed since the last scan.
    pub changed: bool,
    /// All objects (last good version of each file).
    pub objects: Objects,
    /// Problems found in this scan (bad files, duplicates).
    pub errors: Vec<ManifestError>,
}

impl ManifestDir {
    /// Watches `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            files: BTreeMap::new(),
        }
    }

    /// Scans the directory.
    pub fn scan(&mut self) -> Scan {
        let mut scan = Scan::default();
        let mut paths = Vec::new();
        if let Err(e) = collect(&self.dir, &mut paths) {
            scan.errors.push(ManifestError {
                file: self.dir.clone(),
                document: None,
                problem: format!("cannot read the manifest directory: {e}; check --manifests"),
            });
            scan.objects = self.merged(&mut scan.errors);
            return scan;
        }
        let present: HashSet<&PathBuf> = paths.iter().collect();
        let before = self.files.len();
        self.files.retain(|p, _| present.contains(p));
        scan.changed = self.files.len() != before;
        for path in &paths {
            let stamp = fs::metadata(path)
                .ok()
                .and_then(|m| Some((m.modified().ok()?, m.len())));
            let cached = self.files.get(path);
            if stamp.is_some() && cached.is_some_and(|c| c.stamp == stamp) {
                continue;
            }
            match read_file(path) {
                Ok(objects) => {
                    let file = FileObjects {
                        stamp,
                        objects,
                        loaded: true,
                        failing: None,
                    };
                    self.files.insert(path.clone(), file);
                    scan.changed = true;
                }
                Err(e) => {
                    scan.errors.push(e.clone());
                    // Keep the last good objects; remember the stamp so the error is
                    // reported once per edit, not on every scan.
                    let entry = self.files.entry(path.clone()).or_default();
                    entry.stamp = stamp;
                    entry.failing = Some(e);
                }
            }
        }
        scan.objects = self.merged(&mut scan.errors);
        scan
    }

    /// Files that fail to load and have no good version from this process: what they
    /// define is unknown, so nothing may be judged on their absence.
    pub fn unloaded(&self) -> Vec<&ManifestError> {
        self.files
            .values()
            .filter(|f| !f.loaded)
            .filter_map(|f| f.failing.as_ref())
            .collect()
    }

    fn merged(&self, errors: &mut Vec<ManifestError>) -> Objects {
        let mut all = Objects::default();
        let mut seen: BTreeMap<(&'static str, String), &Path> = BTreeMap::new();
        for (path, file) in &self.files {
            let mut keep = |kind: &'static str, id: String| match seen.get(&(kind, id.clone())) {
                Some(first) => {
                    errors.push(ManifestError {
                        file: path.clone(),
                        document: None,
                        problem: format!(
                            "{kind} {id} is also defined in {}; the first one is used: remove one",
                            first.display()
                        ),
                    });
                    false
                }
                None => {
                    seen.insert((kind, id), path);
                    true
                }
            };
            let o = &file.objects;
            for x in &o.member_clusters {
                if keep("MemberCluster", ns_name(&x.metadata)) {
                    all.member_clusters.push(x.clone());
                }
            }
            for x in &o.cluster_sets {
                if keep("ClusterSet", ns_name(&x.metadata)) {
                    all.cluster_sets.push(x.clone());
                }
            }
            for x in &o.sets {
                if keep("Set", ns_name(&x.metadata)) {
                    all.sets.push(x.clone());
                }
            }
            all.hub_objects.extend(o.hub_objects.iter().cloned());
            for x in &o.health_policies {
                if keep("HealthPolicy", ns_name(&x.metadata)) {
                    all.health_policies.push(x.clone());
                }
            }
        }
        all
    }
}

fn ns_name(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    match &meta.namespace {
        Some(ns) => format!("{ns}/{}", meta.name.as_deref().unwrap_or_default()),
        None => meta.name.clone().unwrap_or_default(),
    }
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<_> = fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.path());
    for entry in entries {
        let path = entry.path();
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        if entry.file_type()?.is_dir() {
            collect(&path, out)?;
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml" | "json")
        ) {
            out.push(path);
        }
    }
    Ok(())
}

/// Parses one manifest file into objects; the first bad document fails the file.
pub fn read_file(path: &Path) -> Result<Objects, ManifestError> {
    let fail = |document: Option<usize>, problem: String| ManifestError {
        file: path.to_owned(),
        document,
        problem,
    };
    let text = fs::read_to_string(path).map_err(|e| fail(None, format!("cannot read: {e}")))?;
    let mut objects = Objects::default();
    for (i, doc) in serde_yaml_ng::Deserializer::from_str(&text).enumerate() {
        let n = Some(i + 1);
        let value = serde_json::Value::deserialize(doc)
            .map_err(|e| fail(n, format!("not valid YAML: {e}")))?;
        if value.is_null() {
            continue;
        }
        add_object(value, &mut objects).map_err(|problem| fail(n, problem))?;
    }
    Ok(objects)
}

fn add_object(value: serde_json::Value, objects: &mut Objects) -> Result<(), String> {
    let api_version = value
        .get("apiVersion")
        .and_then(|v| v.as_str())
        .unwrap_or_default()
        .to_owned();
    let kind = value
        .get("kind")
        .and_then(|v| v.as_str())
        .unwrap_or_default()
        .to_owned();
    if !api_version.starts_with("fleetpulse.io/") {
        // Objects of other APIs are data for hub-side checks (e.g. KeptnMetric objects).
        if api_version.is_empty() || kind.is_empty() {
            return Err("a document without apiVersion and kind is not a Kubernetes object".into());
        }
        objects.hub_objects.push(value);
        return Ok(());
    }
    if api_version != API_VERSION {
        return Err(format!(
            "apiVersion {api_version:?} (kind {kind:?}) is not {API_VERSION:?}; this hub reads \
             MemberCluster, ClusterSet, Set and HealthPolicy of {API_VERSION}"
        ));
    }
    if let Err(problems) = fleetpulse_common::api::schema::check_object(&kind, &value) {
        let name = value
            .pointer("/metadata/name")
            .and_then(|n| n.as_str())
            .unwrap_or("(unnamed)");
        let listed: Vec<String> = problems.iter().map(ToString::to_string).collect();
        return Err(format!(
            "{kind} {name} does not match its schema (as `kubectl apply --validate=strict` \
             would refuse it): {}",
            listed.join("; ")
        ));
    }
    fn parse<T: serde::de::DeserializeOwned>(
        kind: &str,
        value: serde_json::Value,
    ) -> Result<T, String> {
        serde_json::from_value(value).map_err(|e| format!("{kind} does not match its schema: {e}"))
    }
    let named = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| match meta
        .name
        .as_deref()
    {
        Some(n) if !n.is_empty() => Ok(n.to_owned()),
        _ => Err(format!(
            "{kind} has no metadata.name; every object needs one"
        )),
    };
    let invalid = |name: &str, e: fleetpulse_common::checks::validate::ValidationError| {
        format!("{kind} {name}: {e}")
    };
    match kind.as_str() {
        "MemberCluster" => {
            let mut x: MemberCluster = parse(&kind, value)?;
            let name = named(&x.metadata)?;
            x.metadata.namespace.get_or_insert_with(|| "default".into());
            x.spec.validate().map_err(|e| invalid(&name, e))?;
            objects.member_clusters.push(Arc::new(x));
        }
        "ClusterSet" => {
            let mut x: ClusterSet = parse(&kind, value)?;
            let name = named(&x.metadata)?;
            x.metadata.namespace = None;
            x.spec.set.validate().map_err(|e| invalid(&name, e))?;
            objects.cluster_sets.push(Arc::new(x));
        }
        "Set" => {
            let mut x: Set = parse(&kind, value)?;
            let name = named(&x.metadata)?;
            x.metadata.namespace.get_or_insert_with(|| "default".into());
            x.spec.validate().map_err(|e| invalid(&name, e))?;
            objects.sets.push(Arc::new(x));
        }
        "HealthPolicy" => {
            let mut x: HealthPolicy = parse(&kind, value)?;
            let name = named(&x.metadata)?;
            x.metadata.namespace.get_or_insert_with(|| "default".into());
            x.spec.validate().map_err(|e| invalid(&name, e))?;
            objects.health_policies.push(Arc::new(x));
        }
        other => {
            return Err(format!(
                "kind {other:?} is not one the hub reads (MemberCluster, ClusterSet, Set, HealthPolicy)"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
