//! Turning probe specs into targets, and the errors of bad specs.

use fleetpulse_common::api::check::{HttpProbe, HttpScheme, ServiceRef, TcpProbe};

use super::target::*;

fn service(port: u16) -> ServiceRef {
    ServiceRef {
        namespace: "web".into(),
        name: "frontend".into(),
        port,
    }
}

#[test]
fn service_url_defaults_to_http_and_root_path() {
    let probe = HttpProbe {
        service: Some(service(8080)),
        ..HttpProbe::default()
    };
    let url = http_url(&probe).unwrap();
    assert_eq!(url.as_str(), "http://frontend.web.svc:8080/");
}

#[test]
fn service_url_uses_scheme_and_path() {
    let probe = HttpProbe {
        service: Some(service(8443)),
        scheme: Some(HttpScheme::Https),
        path: Some("healthz?full=1".into()),
        ..HttpProbe::default()
    };
    let url = http_url(&probe).unwrap();
    assert_eq!(url.as_str(), "https://frontend.web.svc:8443/healthz?full=1");
}

#[test]
fn http_spec_without_or_with_two_targets_names_the_fields() {
    let none = http_url(&HttpProbe::default()).unwrap_err().to_string();
    assert!(
        none.contains("`http.url`") && none.contains("`http.service`"),
        "{none}"
    );
    let both = HttpProbe {
        url: Some("http://x/".into()),
        service: Some(service(80)),
        ..HttpProbe::default()
    };
    assert!(matches!(
        http_url(&both),
        Err(ProbeSpecError::HttpBothTargets)
    ));
}

#[test]
fn service_port_zero_is_reported_as_missing_port() {
    let probe = HttpProbe {
        service: Some(service(0)),
        ..HttpProbe::default()
    };
    let err = http_url(&probe).unwrap_err().to_string();
    assert!(err.contains("`http.service.port`"), "{err}");
}

#[test]
fn path_next_to_url_is_refused() {
    let probe = HttpProbe {
        url: Some("http://x/".into()),
        path: Some("/healthz".into()),
        ..HttpProbe::default()
    };
    let err = http_url(&probe).unwrap_err().to_string();
    assert!(err.contains("`http.path`"), "{err}");
}

#[test]
fn non_http_url_is_refused() {
    let probe = HttpProbe {
        url: Some("ftp://x/".into()),
        ..HttpProbe::default()
    };
    assert!(matches!(
        http_url(&probe),
        Err(ProbeSpecError::BadUrl { .. })
    ));
}

#[test]
fn tcp_targets_host_port_or_service() {
    let host = TcpProbe {
        host: Some("[::1]".into()),
        port: Some(6379),
        ..TcpProbe::default()
    };
    assert_eq!(tcp_address(&host).unwrap(), ("::1".to_owned(), 6379));
    let svc = TcpProbe {
        service: Some(service(5432)),
        ..TcpProbe::default()
    };
    assert_eq!(
        tcp_address(&svc).unwrap(),
        ("frontend.web.svc".to_owned(), 5432)
    );
    assert_eq!(display_address("::1", 80), "[::1]:80");
}

#[test]
fn tcp_spec_errors_name_the_field() {
    let no_port = TcpProbe {
        host: Some("db".into()),
        ..TcpProbe::default()
    };
    assert!(matches!(
        tcp_address(&no_port),
        Err(ProbeSpecError::TcpPortMissing)
    ));
    assert!(matches!(
        tcp_address(&TcpProbe::default()),
        Err(ProbeSpecError::TcpNoTarget)
    ));
    let both = TcpProbe {
        host: Some("db".into()),
        port: Some(1),
        service: Some(service(1)),
    };
    assert!(matches!(
        tcp_address(&both),
        Err(ProbeSpecError::TcpBothTargets)
    ));
    let port_with_service = TcpProbe {
        port: Some(1),
        service: Some(service(1)),
        ..TcpProbe::default()
    };
    assert!(matches!(
        tcp_address(&port_with_service),
        Err(ProbeSpecError::TcpPortWithService)
    ));
}
