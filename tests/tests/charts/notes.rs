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
