//! The operator's chart objects: agent probes on its `--listen` port and its ServiceMonitor,
//! PodDisruptionBudgets, NetworkPolicies, image digests, extra volumes and env, the hub CA
//! from a Secret, hub URLs (IPv6 literals accepted, a clear message otherwise), and default
//! image references equal to what `scripts/build-images.sh` tags.

use super::tools::{
    AGENT_MINIMAL, Chart, container, documents, one, render, repo_root, strings, template,
};

fn agent(extra: &[&str]) -> Vec<serde_json::Value> {
    let mut args = strings(AGENT_MINIMAL);
    args.extend(strings(extra));
    documents(&render(Chart::Agent, &args))
}

#[test]
fn the_agent_listens_for_its_probes_and_metrics_and_its_service_monitor_scrapes_that_port() {
    let docs = agent(&[]);
    let c = container(one(&docs, "Deployment"), "agent");
    let args = c["args"].as_array().unwrap();
    assert!(
        args.iter().any(|a| a == "--listen=0.0.0.0:9090"),
        "{args:?}"
    );
    assert_eq!(c["ports"][0]["containerPort"], 9090);
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert!(!docs.iter().any(|d| d["kind"] == "ServiceMonitor"));

    let docs = agent(&["-f", "charts/fleetpulse-agent/ci/all-features-values.yaml"]);
    let monitor = one(&docs, "ServiceMonitor");
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], "metrics");
    let service = one(&docs, "Service");
    assert_eq!(service["spec"]["ports"][0]["port"], 9091);
    assert_eq!(
        service["spec"]["selector"],
        one(&docs, "Deployment")["spec"]["selector"]["matchLabels"]
    );
    let policy = one(&docs, "NetworkPolicy");
    assert_eq!(policy["spec"]["ingress"][0]["ports"][0]["port"], "metrics");
    assert_eq!(
        one(&docs, "PodDisruptionBudget")["spec"]["maxUnavailable"],
        1
    );
    let c = container(one(&docs, "Deployment"), "agent");
    let mounts = c["volumeMounts"].as_array().unwrap();
    assert!(
        mounts.iter().any(|m| m["mountPath"] == "/etc/ssl/probe"),
        "{mounts:?}"
    );

    let docs = agent(&["--set", "metrics.enabled=false"]);
    let c = container(one(&docs, "Deployment"), "agent");
    assert!(c["livenessProbe"].is_null() && c["ports"].is_null(), "{c}");
}

#[test]
fn the_hubs_optional_objects_render_with_their_values() {
    let docs = documents(&render(
        Chart::Hub,
        &strings(&["-f", "charts/fleetpulse-hub/ci/all-features-values.yaml"]),
    ));
    assert_eq!(
        one(&docs, "PodDisruptionBudget")["spec"]["maxUnavailable"],
        1
    );
    let policy = one(&docs, "NetworkPolicy");
    assert_eq!(
        policy["spec"]["ingress"][0]["from"][0]["ipBlock"]["cidr"],
        "203.0.113.0/24"
    );
    // The admin port is not open to the agents' sources: only to this cluster's Pods.
    assert_eq!(policy["spec"]["ingress"][1]["ports"][0]["port"], "admin");
    assert_eq!(
        policy["spec"]["ingress"][1]["from"],
        serde_json::json!([{"namespaceSelector": {}}])
    );
    let c = container(one(&docs, "Deployment"), "hub");
    let args = c["args"].as_array().unwrap();
    assert!(
        args.iter().any(|a| a == "--per-cluster-metrics"),
        "{args:?}"
    );
    assert!(
        c["env"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "TZ")
    );
    let volumes = one(&docs, "Deployment")["spec"]["template"]["spec"]["volumes"].clone();
    assert!(
        volumes
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["name"] == "extra-ca"),
        "{volumes}"
    );
    let dashboard = one(&docs, "ConfigMap");
    assert_eq!(
        dashboard["metadata"]["annotations"]["grafana_folder"],
        "fleetpulse"
    );
    let rules = one(&docs, "PrometheusRule")["spec"]["groups"][0]["rules"].clone();
    assert!(
        !rules
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["alert"] == "ReportsRejected")
    );
}

#[test]
fn the_hub_ca_comes_from_a_secret_and_the_image_from_a_digest_when_asked() {
    let docs = agent(&["-f", "charts/fleetpulse-agent/ci/hub-ca-secret-values.yaml"]);
    let deployment = one(&docs, "Deployment");
    let volumes = deployment["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap();
    let ca = volumes
        .iter()
        .find(|v| v["name"] == "hub-ca")
        .expect("hub-ca volume");
    assert_eq!(ca["secret"]["secretName"], "fleetpulse-hub-ca");
    let c = container(deployment, "agent");
    assert!(
        c["args"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "--hub-ca=/etc/fleetpulse/hub-ca/ca.crt")
    );
    assert!(
        c["args"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "--hub=https://[fd00:10::1]:8443")
    );
    let image = c["image"].as_str().unwrap();
    assert!(
        image.starts_with("ghcr.io/fleetpulse/fleetpulse-agent@sha256:0123"),
        "{image}"
    );
}

#[test]
fn hub_urls_with_ipv6_literals_are_accepted_and_bad_ones_are_refused_saying_what_is_wanted() {
    for good in [
        "https://[fd00::1]:8443",
        "https://10.0.0.1",
        "https://hub.example.com/prefix",
    ] {
        let mut args = strings(AGENT_MINIMAL);
        args.extend(strings(&["--set-string", &format!("hub.url={good}")]));
        assert!(template(Chart::Agent, &args).is_ok(), "{good} refused");
    }
    for bad in [
        "https://user@hub.example.com",
        "https://hub.example.com/?x=1",
        "https://[hub]",
    ] {
        let mut args = strings(AGENT_MINIMAL);
        args.extend(strings(&["--set-string", &format!("hub.url={bad}")]));
        let err = template(Chart::Agent, &args).unwrap_err();
        assert!(
            err.contains("must be https://HOST[:PORT][/PATH]") && err.contains("IPv6"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn the_charts_default_images_are_the_ones_build_images_tags() {
    let script = repo_root().join("scripts/build-images.sh");
    let out = std::process::Command::new("bash")
        .arg(script)
        .arg("--print-refs")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let refs: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let hub = documents(&render(Chart::Hub, &[]));
    let agent = agent(&[]);
    let images = [
        container(one(&hub, "Deployment"), "hub")["image"]
            .as_str()
            .unwrap()
            .to_owned(),
        container(one(&agent, "Deployment"), "agent")["image"]
            .as_str()
            .unwrap()
            .to_owned(),
    ];
    assert_eq!(refs, images);
}

#[test]
fn helm_show_readme_prints_each_charts_readme() {
    use super::tools::helm;
    for chart in [Chart::Hub, Chart::Agent] {
        let out = helm(&strings(&["show", "readme", &chart.dir()]));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.starts_with(&format!("# {}", chart.name())) && text.contains("| value |"),
            "{text}"
        );
    }
}
