//! The NOTES helm prints after an install: the agent's command for its public key and key
//! id really prints them, and the hub's tells how to register a cluster.

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
fn the_agent_notes_command_prints_the_public_key_and_key_id_of_the_generated_key() {
    use fleetpulse_common::protocol::keys::{self, KeyId};
    let text = notes(Chart::Agent, &strings(AGENT_MINIMAL));
    // The two commands, with kubectl replaced by the Secret's data as kubectl prints it.
    let start = text.find("PUB=$(").expect("the PUB= command");
    let script: String = text[start..]
        .lines()
        .take(6)
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    let key = keys::generate();
    let data = base64_encode(keys::to_pem(&key).as_bytes());
    let kubectl = format!(
        "kubectl -n {NAMESPACE} get secret fleetpulse-agent-key -o jsonpath='{{.data.key\\.pem}}'"
    );
    assert!(script.contains(&kubectl), "{script}");
    let script = script.replace(&kubectl, &format!("printf %s {data}"));
    let out = std::process::Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).unwrap();
    let public = keys::public_key_string(&key.verifying_key());
    assert!(
        printed.contains(&format!("public key: {public}")),
        "{printed}"
    );
    assert!(
        printed.contains(KeyId::of(&key.verifying_key()).as_str()),
        "{printed}"
    );

    let hub = notes(Chart::Hub, &[]);
    assert!(
        hub.contains("MemberCluster") && hub.contains("helm install fleetpulse-agent"),
        "{hub}"
    );
}

fn base64_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
