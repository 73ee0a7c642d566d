//! The NOTES helm prints after an install: the agent's command for its public key runs the
//! agent's `pubkey` on its key Secret, and the hub's tells how to register a cluster.

use super::tools::{AGENT_MINIMAL, Chart, NAMESPACE, RELEASE, helm, strings};

fn notes(chart: Chart, args: &[String]) -> String {
    let mut install = strings(&["install", RELEASE]);
    install.push(chart.dir());
    install.extend(strings(&["--namespace", NAMESPACE, "--dry-run=client"]));
    install.extend(args.iter().cloned());
    let out = helm(&install);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    text.split_once("NOTES:\n").expect("NOTES").1.to_owned()
}

#[test]
fn the_agent_notes_command_runs_the_agents_pubkey_on_its_key_secret() {
    use clap::Parser;
    use fleetpulse_agent::cli::{Cli, Command};
    let text = notes(Chart::Agent, &strings(AGENT_MINIMAL));
    let line = text
        .lines()
        .find(|l| l.contains("fleetpulse-agent pubkey"))
        .expect("the pubkey command");
    let (kubectl, agent) = line
        .split_once(" -- ")
        .expect("kubectl exec ... -- command");
    assert_eq!(
        kubectl.trim(),
        format!("kubectl -n {NAMESPACE} exec deploy/{RELEASE}-fleetpulse-agent")
    );
    let words: Vec<&str> = agent.split_whitespace().collect();
    let cli = Cli::try_parse_from(&words).unwrap_or_else(|e| panic!("{line}: {e}"));
    let Command::Pubkey(args) = cli.command else {
        panic!("{line} is not `pubkey`");
    };
    assert_eq!(
        args.from_secret.map(|s| s.to_string()),
        Some(format!("{NAMESPACE}/fleetpulse-agent-key"))
    );

    let hub = notes(Chart::Hub, &[]);
    assert!(
        hub.contains("MemberCluster") && hub.contains("helm install fleetpulse-agent"),
        "{hub}"
    );
}

#[test]
fn the_hub_notes_token_and_approve_commands_parse_against_the_release_namespace() {
    use clap::Parser;
    use fleetpulse_hub::cli::{Cli, Command};
    let text = notes(Chart::Hub, &[]);
    let hub_command = |needle: &str| {
        let line = text
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} in {text}"));
        let (kubectl, hub) = line
            .split_once(" -- ")
            .expect("kubectl exec ... -- command");
        assert_eq!(
            kubectl.trim(),
            format!("kubectl -n {NAMESPACE} exec deploy/{RELEASE}-fleetpulse-hub")
        );
        let words: Vec<&str> = hub.split_whitespace().collect();
        Cli::try_parse_from(&words).unwrap_or_else(|e| panic!("{line}: {e}"))
    };
    let Command::Token(token) = hub_command("fleetpulse-hub token create").command else {
        panic!("not `token create`");
    };
    assert!(token.store.kube);
    assert_eq!(token.store.enrolment_namespace, NAMESPACE);
    let fleetpulse_hub::cli::enrolment::TokenCommand::Create(create) = token.command else {
        panic!("not `token create`");
    };
    assert_eq!(
        create.tls_cert.as_deref(),
        Some(std::path::Path::new("/etc/fleetpulse/tls/tls.crt"))
    );
    assert_eq!(
        create.cluster.map(|c| c.to_string()).as_deref(),
        Some("fleet/edge-1")
    );
    let Command::Approve(approve) = hub_command("fleetpulse-hub approve").command else {
        panic!("not `approve`");
    };
    assert!(approve.store.kube && approve.store.enrolment_namespace == NAMESPACE);
    assert!(
        text.contains("bootstrap.token=\"$TOKEN\"") && text.contains("hub.caHash=\"$CA_HASH\"")
    );
}
