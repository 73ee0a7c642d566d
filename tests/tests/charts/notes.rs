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

/// The shell commands of a NOTES text, as a reader would paste them: every line that
/// starts (after indentation) with a command, the lines it continues onto (a trailing
/// `\`), and a here-document up to the line that closes it for a human (its delimiter,
/// maybe indented: bash then waits for more, which `bash -n` reports).
fn pasted_commands(notes: &str) -> Vec<String> {
    const COMMANDS: &[&str] = &["kubectl ", "helm ", "PUB=", "echo ", "printf "];
    let mut lines = notes.lines().peekable();
    let mut commands = Vec::new();
    while let Some(line) = lines.next() {
        if !COMMANDS.iter().any(|c| line.trim_start().starts_with(c)) {
            continue;
        }
        let mut command = vec![line.to_owned()];
        let mut last = line.to_owned();
        while last.ends_with('\\')
            && let Some(next) = lines.next()
        {
            command.push(next.to_owned());
            last = next.to_owned();
        }
        if let Some((_, rest)) = last.split_once("<<") {
            let delimiter = rest.trim_start_matches('-').trim().trim_matches('\'');
            for body in lines.by_ref() {
                command.push(body.to_owned());
                if body.trim() == delimiter {
                    break;
                }
            }
        }
        commands.push(command.join("\n"));
    }
    commands
}

#[test]
fn every_command_in_both_charts_notes_is_valid_shell_as_pasted() {
    let mut sets: Vec<(Chart, String, Vec<String>)> = Vec::new();
    for chart in [Chart::Hub, Chart::Agent] {
        for (name, args) in chart.value_sets() {
            sets.push((chart, name, args));
        }
    }
    for (chart, name, args) in sets {
        let text = notes(chart, &args);
        let commands = pasted_commands(&text);
        assert!(
            commands.len() >= 2,
            "{} {name}: commands found: {commands:?}",
            chart.name()
        );
        let script = commands.join("\n");
        let out = std::process::Command::new("bash")
            .args(["-n", "-c", &script])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stderr.is_empty(),
            "{} NOTES with {name} do not paste:\n{stderr}\n{script}",
            chart.name()
        );
    }
}

#[test]
fn an_indented_here_document_delimiter_is_caught() {
    let notes = "Create it:\n  kubectl apply -f - <<YAML\n  kind: X\n  YAML\n";
    let script = pasted_commands(notes).join("\n");
    let out = std::process::Command::new("bash")
        .args(["-n", "-c", &script])
        .output()
        .unwrap();
    assert!(
        !out.stderr.is_empty(),
        "bash -n accepted an unclosed here-document: {script}"
    );
}
