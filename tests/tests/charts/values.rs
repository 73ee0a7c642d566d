//! Values: optional features render their objects, images follow the chart's appVersion,
//! and invalid values are refused by helm with a message naming the value.

use super::tools::{
    AGENT_MINIMAL, Chart, container, documents, helm, of_kind, one, render, repo_root, strings,
    template,
};

#[test]
fn optional_features_render_their_objects() {
    let hub = documents(&render(
        Chart::Hub,
        &strings(&["-f", "charts/fleetpulse-hub/ci/all-features-values.yaml"]),
    ));
    let ingress = one(&hub, "Ingress");
    assert_eq!(
        ingress["spec"]["rules"][0]["host"],
        "fleetpulse.example.com"
    );
    let cert = one(&hub, "Certificate");
    assert_eq!(cert["apiVersion"], "cert-manager.io/v1");
    assert_eq!(cert["spec"]["secretName"], "fp-fleetpulse-hub-tls");
    assert_eq!(cert["spec"]["issuerRef"]["kind"], "ClusterIssuer");
    let names = cert["spec"]["dnsNames"].as_array().unwrap();
    for name in [
        "fp-fleetpulse-hub.fleetpulse-system.svc",
        "fleetpulse.example.com",
    ] {
        assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
    }
    let monitor = one(&hub, "ServiceMonitor");
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], "admin");
    assert_eq!(
        monitor["spec"]["selector"]["matchLabels"]["fleetpulse.io/service"],
        "admin"
    );
    assert_eq!(monitor["spec"]["endpoints"][0]["path"], "/metrics");
    let deployment = one(&hub, "Deployment");
    assert_eq!(deployment["spec"]["replicas"], 2);
    let args = container(deployment, "hub")["args"]
        .as_array()
        .unwrap()
        .clone();
    assert!(args.iter().any(|a| a == "--leader-elect"), "{args:?}");
    let defaults = documents(&render(Chart::Hub, &[]));
    for kind in ["Ingress", "Certificate", "ServiceMonitor"] {
        assert!(
            of_kind(&defaults, kind).is_empty(),
            "{kind} is off by default"
        );
    }

    let agent = documents(&render(
        Chart::Agent,
        &strings(&["-f", "charts/fleetpulse-agent/ci/all-features-values.yaml"]),
    ));
    let ns = one(&agent, "Namespace");
    assert_eq!(ns["metadata"]["name"], "fleetpulse-checks");
    assert_eq!(
        ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "restricted"
    );
    let ca = one(&agent, "ConfigMap");
    assert!(
        ca["data"]["ca.crt"]
            .as_str()
            .unwrap()
            .starts_with("-----BEGIN CERTIFICATE-----")
    );
    let agent_container = container(one(&agent, "Deployment"), "agent");
    let env: Vec<&str> = agent_container["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    for var in ["HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY"] {
        assert!(env.contains(&var), "{var} in {env:?}");
    }
    let args = agent_container["args"].as_array().unwrap();
    assert!(
        args.iter()
            .any(|a| a == "--hub-ca=/etc/fleetpulse/hub-ca/ca.crt")
    );
    assert!(
        args.iter()
            .any(|a| a == "--checks-namespace=fleetpulse-checks")
    );
}

#[test]
fn images_default_to_the_chart_app_version_and_follow_image_tag() {
    for (chart, base) in [(Chart::Hub, vec![]), (Chart::Agent, strings(AGENT_MINIMAL))] {
        let chart_yaml =
            std::fs::read_to_string(repo_root().join(chart.dir()).join("Chart.yaml")).unwrap();
        let app_version = chart_yaml
            .lines()
            .find_map(|l| l.strip_prefix("appVersion: "))
            .unwrap()
            .trim_matches('"');
        let image = |args: &[String]| {
            let docs = documents(&render(chart, args));
            one(&docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["image"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        assert_eq!(
            image(&base),
            format!("ghcr.io/fleetpulse/{}:{app_version}", chart.name())
        );
        let mut tagged = base.clone();
        tagged.extend(strings(&["--set", "image.tag=1.2.3"]));
        assert!(image(&tagged).ends_with(":1.2.3"));
    }
}

/// (chart, extra helm arguments, what helm's message must say).
const INVALID: &[(Chart, &[&str], &str)] = &[
    (
        Chart::Hub,
        &["--set", "replicas=0"],
        "at '/replicas': minimum: got 0, want 1",
    ),
    (
        Chart::Hub,
        &["--set-string", "replicas=2"],
        "at '/replicas': got string, want integer",
    ),
    (
        Chart::Hub,
        &["--set", "replica=2"],
        "additional properties 'replica' not allowed",
    ),
    (
        Chart::Hub,
        &["--set", "service.type=External"],
        "at '/service/type'",
    ),
    (
        Chart::Hub,
        &["--set", "containerPort=80"],
        "at '/containerPort': minimum: got 80, want 1",
    ),
    (Chart::Hub, &["--set", "logFormat=xml"], "at '/logFormat'"),
    (
        Chart::Hub,
        &["--set", "tls.certManager.enabled=true"],
        "tls.certManager.issuerRef.name is empty",
    ),
    (
        Chart::Hub,
        &["--set", "ingress.enabled=true"],
        "ingress.host is empty",
    ),
    (
        Chart::Hub,
        &[
            "--set",
            "rbac.hubReads[0].apiGroups[0]=*",
            "--set",
            "rbac.hubReads[0].resources[0]=pods",
        ],
        "rbac.hubReads[0] uses \"*\"",
    ),
    (Chart::Agent, &[], "hub.url is required"),
    (
        Chart::Agent,
        &["--set", "hub.url=https://hub.example.com"],
        "cluster.namespace and cluster.name are required",
    ),
    (
        Chart::Agent,
        &[
            "-f",
            "charts/fleetpulse-agent/ci/minimal-values.yaml",
            "--set",
            "hub.url=http://hub.example.com",
        ],
        "at '/hub/url'",
    ),
    (
        Chart::Agent,
        &[
            "-f",
            "charts/fleetpulse-agent/ci/minimal-values.yaml",
            "--set",
            "key.source=vault",
        ],
        "at '/key/source'",
    ),
    (
        Chart::Agent,
        &[
            "-f",
            "charts/fleetpulse-agent/ci/minimal-values.yaml",
            "--set",
            "intervalSeconds=0",
        ],
        "at '/intervalSeconds': minimum: got 0, want 1",
    ),
    (
        Chart::Agent,
        &[
            "-f",
            "charts/fleetpulse-agent/ci/minimal-values.yaml",
            "--set-string",
            "intervalSeconds=10",
        ],
        "at '/intervalSeconds': got string, want integer",
    ),
    (
        Chart::Agent,
        &[
            "-f",
            "charts/fleetpulse-agent/ci/minimal-values.yaml",
            "--set",
            "hubUrl=https://x",
        ],
        "additional properties 'hubUrl' not allowed",
    ),
    (
        Chart::Agent,
        &[
            "-f",
            "charts/fleetpulse-agent/ci/minimal-values.yaml",
            "--set",
            "proxy.httpsProxy=proxy:3128",
        ],
        "at '/proxy/httpsProxy'",
    ),
    (
        Chart::Agent,
        &[
            "-f",
            "charts/fleetpulse-agent/ci/minimal-values.yaml",
            "--set",
            "hub.caBundle=not-a-pem",
        ],
        "hub.caBundle is not a PEM certificate bundle",
    ),
    (
        Chart::Agent,
        &[
            "-f",
            "charts/fleetpulse-agent/ci/minimal-values.yaml",
            "--set",
            "rbac.read.extraRules[0].apiGroups[0]=",
            "--set",
            "rbac.read.extraRules[0].resources[0]=secrets",
            "--set",
            "rbac.read.extraRules[0].verbs[0]=get",
        ],
        "rbac.read.extraRules[0] grants \"secrets\"",
    ),
    (
        Chart::Agent,
        &[
            "-f",
            "charts/fleetpulse-agent/ci/minimal-values.yaml",
            "--set",
            "rbac.read.extraRules[0].apiGroups[0]=apps",
            "--set",
            "rbac.read.extraRules[0].resources[0]=deployments",
            "--set",
            "rbac.read.extraRules[0].verbs[0]=delete",
        ],
        "at '/rbac/read/extraRules/0/verbs/0'",
    ),
];

#[test]
fn invalid_values_are_refused_with_a_message_naming_the_value() {
    for (chart, args, expected) in INVALID {
        let args = strings(args);
        match template(*chart, &args) {
            Ok(_) => panic!("{} accepted invalid values {args:?}", chart.name()),
            Err(message) => assert!(
                message.contains(expected),
                "{} {args:?}: expected {expected:?} in helm's message:\n{message}",
                chart.name()
            ),
        }
    }
    let mut lint = strings(&["lint", "--strict"]);
    lint.push(Chart::Hub.dir());
    lint.extend(strings(&["--set", "replicas=0"]));
    assert!(
        !helm(&lint).status.success(),
        "helm lint refuses replicas 0 too"
    );
}
