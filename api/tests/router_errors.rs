//! Every error path of the router, asked in-process with `tower::ServiceExt::oneshot`: no
//! process, no socket, no master (the paths here all fail before the master is needed).

mod support;

use axum::body::Body;
use axum::http::StatusCode;
use serde_json::{json, Value};
use support::{json_req, req, Api};

/// Salt's error shape plus ours, with this status and kind.
fn assert_error((status, _, body): &(StatusCode, String, Value), want: u16, kind: &str) -> String {
    assert_eq!(status.as_u16(), want, "{body}");
    assert_eq!(body["status"], json!(want), "{body}");
    assert_eq!(body["error"]["status"], json!(want), "{body}");
    assert_eq!(body["error"]["code"], json!(kind), "{body}");
    let message = body["return"].as_str().expect("return is the message");
    assert_eq!(body["error"]["message"], json!(message), "{body}");
    message.to_string()
}

fn ping() -> Value {
    json!({"client": "local", "tgt": "*", "fun": "test.ping"})
}

#[tokio::test]
async fn welcome_is_served_in_the_negotiated_format() {
    let api = Api::new("");
    let (status, ctype, body) = api.call(req("GET", "/").body(Body::empty()).unwrap()).await;
    assert_eq!(
        (status, ctype.as_str()),
        (StatusCode::OK, "application/json")
    );
    assert_eq!(body["return"], "Welcome");
    let (status, ctype, body) = api
        .call(
            req("GET", "/run")
                .header("accept", "application/x-yaml")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(
        (status, ctype.as_str()),
        (StatusCode::OK, "application/x-yaml")
    );
    assert_eq!(body["return"], "Welcome");
}

#[tokio::test]
async fn no_token_and_bad_tokens_are_401() {
    let api = Api::new("");
    let no_token = api.call(json_req("POST", "/", None, &ping())).await;
    let message = assert_error(&no_token, 401, "unauthorized");
    assert_eq!(message, "No permission -- see authorization schemes");
    for token in ["not-a-token", "a.b.c", "0123456789abcdef"] {
        let bad = api.call(json_req("POST", "/", Some(token), &ping())).await;
        assert_error(&bad, 401, "unauthorized");
    }
    // A token signed by someone else.
    let other = Api::new("").token("admin");
    let foreign = api.call(json_req("POST", "/", Some(&other), &ping())).await;
    assert_error(&foreign, 401, "unauthorized");
    // A revoked token.
    let token = api.token("admin");
    let out = api
        .call(json_req("POST", "/logout", Some(&token), &json!({})))
        .await;
    assert_eq!(out.0, StatusCode::OK, "{}", out.2);
    let revoked = api.call(json_req("POST", "/", Some(&token), &ping())).await;
    assert!(assert_error(&revoked, 401, "unauthorized").contains("revoked"));
    // The cookie is read as well as the header.
    let cookie = api
        .call(
            req("GET", "/stats")
                .header("cookie", "session_id=bogus")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_error(&cookie, 401, "unauthorized");
    for (method, path) in [
        ("GET", "/minions"),
        ("GET", "/minions/web1"),
        ("POST", "/minions"),
        ("GET", "/jobs"),
        ("GET", "/jobs/20240101000000000000"),
        ("POST", "/logout"),
        ("GET", "/stats"),
        ("POST", "/hook"),
        ("POST", "/hook/a/b"),
        ("GET", "/events"),
        ("GET", "/ws"),
        ("GET", "/ws/not-a-token"),
    ] {
        let answer = api.call(json_req(method, path, None, &json!({}))).await;
        assert_error(&answer, 401, "unauthorized");
    }
    for path in ["/keys", "/keys/web1"] {
        let answer = api.call(json_req("GET", path, None, &json!({}))).await;
        let message = assert_error(&answer, 401, "no_credentials");
        assert_eq!(message, "No authentication credentials given");
    }
}

#[tokio::test]
async fn errors_are_answered_in_the_negotiated_format() {
    let api = Api::new("");
    let answer = api
        .call(
            req("POST", "/")
                .header("accept", "application/x-yaml")
                .header("content-type", "application/json")
                .body(Body::from(ping().to_string()))
                .unwrap(),
        )
        .await;
    assert_eq!(answer.1, "application/x-yaml");
    assert_error(&answer, 401, "unauthorized");
    let answer = api
        .call(
            req("GET", "/nowhere")
                .header("accept", "application/x-yaml")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(answer.1, "application/x-yaml");
    assert_error(&answer, 404, "not_found");
}

#[tokio::test]
async fn unknown_paths_are_404_and_wrong_methods_405() {
    let api = Api::new("");
    let answer = api
        .call(req("GET", "/nowhere").body(Body::empty()).unwrap())
        .await;
    let message = assert_error(&answer, 404, "not_found");
    assert_eq!(message, "The path '/nowhere' was not found.");
    for (method, path) in [
        ("PUT", "/run"),
        ("DELETE", "/"),
        ("POST", "/events"),
        ("GET", "/logout"),
        ("GET", "/hook"),
        ("POST", "/metrics"),
    ] {
        let answer = api
            .call(req(method, path).body(Body::empty()).unwrap())
            .await;
        let message = assert_error(&answer, 405, "method_not_allowed");
        assert_eq!(
            message,
            format!("The method {method} is not allowed for '{path}'.")
        );
    }
}

#[tokio::test]
async fn session_endpoints_are_404_without_sessions() {
    let api =
        Api::new("rest_cherrypy:\n  port: 8000\n  disable_ssl: true\n  enable_sessions: false\n");
    for (method, path) in [
        ("GET", "/login"),
        ("POST", "/logout"),
        ("GET", "/minions"),
        ("GET", "/jobs/1"),
    ] {
        let answer = api
            .call(req(method, path).body(Body::empty()).unwrap())
            .await;
        assert_error(&answer, 404, "not_found");
    }
    let answer = api.call(req("GET", "/").body(Body::empty()).unwrap()).await;
    assert_eq!(answer.0, StatusCode::OK);
}

#[tokio::test]
async fn bodies_over_the_limit_are_413() {
    let api = Api::new("");
    let token = api.token("admin");
    let big = json!({"client": "local", "tgt": "*", "fun": "test.echo", "arg": ["x".repeat(2000)]});
    // With a Content-Length...
    let answer = api.call(json_req("POST", "/", Some(&token), &big)).await;
    assert_error(&answer, 413, "payload_too_large");
    for path in ["/run", "/login", "/token", "/keys"] {
        let answer = api.call(json_req("POST", path, None, &big)).await;
        assert_error(&answer, 413, "payload_too_large");
    }
    // ...and streamed without one.
    let chunks = futures::stream::iter(
        (0..4).map(|_| Ok::<_, std::io::Error>(axum::body::Bytes::from(vec![b' '; 600]))),
    );
    let answer = api
        .call(
            req("POST", "/run")
                .header("content-type", "application/json")
                .body(Body::from_stream(chunks))
                .unwrap(),
        )
        .await;
    assert_error(&answer, 413, "payload_too_large");
}

#[tokio::test]
async fn malformed_bodies_are_400_and_unknown_content_types_406() {
    let api = Api::new("");
    let token = api.token("admin");
    let send = |ctype: &'static str, body: &'static str| {
        req("POST", "/")
            .header("x-auth-token", &token)
            .header("content-type", ctype)
            .body(Body::from(body))
            .unwrap()
    };
    let answer = api.call(send("application/json", "{\"client\": ")).await;
    assert_eq!(
        assert_error(&answer, 400, "invalid_json"),
        "Invalid JSON document"
    );
    let answer = api.call(send("application/x-yaml", "a: [1, 2")).await;
    assert!(assert_error(&answer, 400, "invalid_yaml").starts_with("Invalid YAML document"));
    let answer = api.call(send("application/json", "42")).await;
    assert_eq!(
        assert_error(&answer, 400, "invalid_lowstate"),
        "Lowstates must be a list"
    );
    let answer = api.call(send("application/xml", "<x/>")).await;
    assert_eq!(
        assert_error(&answer, 406, "unsupported_content_type"),
        "Content type not supported"
    );
    // The same on the endpoints that take credentials in the body.
    for path in ["/run", "/login", "/token", "/keys"] {
        let answer = api
            .call(
                req("POST", path)
                    .header("content-type", "application/json")
                    .body(Body::from("[{"))
                    .unwrap(),
            )
            .await;
        assert_error(&answer, 400, "invalid_json");
    }
}

#[tokio::test]
async fn unacceptable_accept_headers_are_406_and_malformed_ones_400() {
    let api = Api::new("");
    for accept in [
        "text/html",
        "text/yaml",
        "application/xml",
        "application/json;q=0",
    ] {
        let answer = api
            .call(
                req("GET", "/")
                    .header("accept", accept)
                    .body(Body::empty())
                    .unwrap(),
            )
            .await;
        assert_eq!(answer.1, "application/json", "{accept}");
        assert_error(&answer, 406, "not_acceptable");
    }
    // Before authentication and routing, as with CherryPy.
    for (method, path) in [("POST", "/"), ("GET", "/nowhere")] {
        let answer = api
            .call(
                req(method, path)
                    .header("accept", "text/plain")
                    .body(Body::empty())
                    .unwrap(),
            )
            .await;
        assert_error(&answer, 406, "not_acceptable");
    }
    let answer = api
        .call(
            req("GET", "/")
                .header("accept", "application/json;q=high")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_error(&answer, 400, "bad_request");
    // Streams and metrics are not negotiated.
    let answer = api
        .call(
            req("GET", "/metrics")
                .header("accept", "text/html")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(answer.0, StatusCode::OK);
}

#[tokio::test]
async fn clients_must_be_known_and_enabled() {
    let api = Api::new("");
    let token = api.token("admin");
    let disabled =
        "Client disabled: 'ssh'. Add to 'netapi_enable_clients' master config option to enable.";
    for client in ["ssh", "local_batch", "wheel_async", "destroy"] {
        let chunk = json!({"client": client, "tgt": "*", "fun": "test.ping"});
        let answer = api.call(json_req("POST", "/", Some(&token), &chunk)).await;
        assert_eq!(
            assert_error(&answer, 400, "client_disabled"),
            disabled.replace("ssh", client)
        );
        // As with Salt, /run checks the client before the credentials: with none, with wrong
        // ones and with good ones, a disabled client is a 400.
        for credentials in [
            json!({}),
            json!({"username": "admin", "password": "wrong", "eauth": "sharedsecret"}),
            json!({"token": "not-a-token"}),
            json!({"token": token}),
        ] {
            let mut chunk = chunk.clone();
            chunk
                .as_object_mut()
                .unwrap()
                .extend(credentials.as_object().unwrap().clone());
            let answer = api.call(json_req("POST", "/run", None, &chunk)).await;
            assert_error(&answer, 400, "client_disabled");
        }
    }
    let answer = api
        .call(json_req(
            "POST",
            "/run",
            None,
            &json!({"client": "nope", "fun": "test.ping"}),
        ))
        .await;
    assert_eq!(
        assert_error(&answer, 400, "invalid_client"),
        "Invalid client specified: 'nope'"
    );
    let answer = api
        .call(json_req(
            "POST",
            "/",
            Some(&token),
            &json!({"tgt": "*", "fun": "test.ping"}),
        ))
        .await;
    assert_eq!(
        assert_error(&answer, 400, "invalid_client"),
        "Invalid client specified: 'None'"
    );
    // POST /minions runs local_async, which must be enabled too.
    let only_local = Api::new("netapi_enable_clients: [local]\n");
    let token = only_local.token("admin");
    let answer = only_local
        .call(json_req("POST", "/minions", Some(&token), &ping()))
        .await;
    assert!(assert_error(&answer, 400, "client_disabled").contains("'local_async'"));
    // GET /jobs and GET /keys wrap the runner and wheel clients.
    for path in ["/jobs", "/keys"] {
        let answer = only_local
            .call(
                req("GET", path)
                    .header("x-auth-token", &token)
                    .body(Body::empty())
                    .unwrap(),
            )
            .await;
        assert_error(&answer, 400, "client_disabled");
    }
}

#[tokio::test]
async fn run_needs_credentials() {
    let api = Api::new("");
    let answer = api.call(json_req("POST", "/run", None, &ping())).await;
    assert_eq!(
        assert_error(&answer, 401, "no_credentials"),
        "No authentication credentials given"
    );
    let mut chunk = ping();
    chunk["username"] = json!("admin");
    chunk["password"] = json!("wrong");
    chunk["eauth"] = json!("sharedsecret");
    let answer = api.call(json_req("POST", "/run", None, &chunk)).await;
    assert_eq!(
        assert_error(&answer, 401, "unauthorized"),
        "Authentication failure of type \"eauth\" occurred for user admin."
    );
    let mut chunk = ping();
    chunk["token"] = json!("not-a-token");
    let answer = api.call(json_req("POST", "/run", None, &chunk)).await;
    assert_error(&answer, 401, "unauthorized");
    // POST /keys takes its credentials in the body too.
    let answer = api
        .call(json_req("POST", "/keys", None, &json!({"mid": "web9"})))
        .await;
    assert_error(&answer, 401, "no_credentials");
}

#[tokio::test]
async fn missing_fun_or_tgt_is_400() {
    let api = Api::new("");
    let token = api.token("admin");
    for (chunk, needle) in [
        (json!({"client": "local", "tgt": "*"}), "'fun'"),
        (json!({"client": "local", "fun": "test.ping"}), "'tgt'"),
        (
            json!({"client": "local_async", "tgt": "*", "fun": ""}),
            "'fun'",
        ),
        (
            json!({"client": "runner"}),
            "runner takes at least 1 argument",
        ),
        (
            json!({"client": "wheel"}),
            "wheel takes at least 1 argument",
        ),
    ] {
        let answer = api.call(json_req("POST", "/", Some(&token), &chunk)).await;
        let message = assert_error(&answer, 400, "bad_request");
        assert!(message.contains(needle), "{chunk}: {message}");
    }
    for value in [json!(-1), json!("NaN"), json!(1e30)] {
        let mut chunk = ping();
        chunk["timeout"] = value;
        let answer = api.call(json_req("POST", "/", Some(&token), &chunk)).await;
        assert!(assert_error(&answer, 400, "bad_request").contains("timeout"));
    }
}

#[tokio::test]
async fn runners_and_wheels_the_acl_denies_are_401() {
    let api = Api::new("");
    let alice = api.token("alice");
    for chunk in [
        json!({"client": "runner", "fun": "jobs.list_jobs"}),
        json!({"client": "wheel", "fun": "key.list_all"}),
    ] {
        let answer = api.call(json_req("POST", "/", Some(&alice), &chunk)).await;
        assert_eq!(
            assert_error(&answer, 401, "unauthorized"),
            "Authentication failure of type \"token\" occurred for user alice."
        );
    }
    // The endpoints that wrap them say the same.
    for path in ["/jobs", "/keys"] {
        let answer = api
            .call(
                req("GET", path)
                    .header("x-auth-token", &alice)
                    .body(Body::empty())
                    .unwrap(),
            )
            .await;
        assert_error(&answer, 401, "unauthorized");
    }
}

#[tokio::test]
async fn login_and_token_errors() {
    let api = Api::new("");
    let answer = api
        .call(json_req(
            "POST",
            "/login",
            None,
            &json!({"username": "admin", "password": "wrong", "eauth": "sharedsecret"}),
        ))
        .await;
    assert_eq!(
        assert_error(&answer, 401, "authentication_failed"),
        "Could not authenticate using provided credentials"
    );
    let answer = api
        .call(json_req(
            "POST",
            "/login",
            None,
            &json!({"username": "admin"}),
        ))
        .await;
    assert_error(&answer, 401, "authentication_failed");
    let answer = api.call(json_req("POST", "/login", None, &json!(42))).await;
    assert_error(&answer, 400, "bad_request");
    let answer = api.call(json_req("POST", "/token", None, &json!([]))).await;
    assert_error(&answer, 400, "bad_request");
    let answer = api
        .call(json_req(
            "POST",
            "/token",
            None,
            &json!({"username": "admin", "password": "wrong", "eauth": "sharedsecret"}),
        ))
        .await;
    assert_error(&answer, 401, "authentication_failed");
    // And the good path, to be sure the errors above are not the only answer.
    let answer = api
        .call(json_req(
            "POST",
            "/login",
            None,
            &json!({"username": "admin", "password": "s3cret", "eauth": "sharedsecret"}),
        ))
        .await;
    assert_eq!(answer.0, StatusCode::OK, "{}", answer.2);
    assert_eq!(answer.2["return"][0]["user"], "admin");
}

#[tokio::test]
async fn stream_endpoints_errors() {
    let api = Api::new("");
    let token = api.token("admin");
    let answer = api
        .call(
            req("GET", "/events?token=x")
                .header("x-auth-token", &token)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_error(&answer, 400, "bad_request");
    // A query is refused before the credentials are looked at.
    let answer = api
        .call(req("GET", "/events?token=x").body(Body::empty()).unwrap())
        .await;
    assert_error(&answer, 400, "bad_request");
    for request in [
        req("GET", "/ws").header("x-auth-token", &token),
        req("GET", &format!("/ws/{token}")),
    ] {
        let answer = api.call(request.body(Body::empty()).unwrap()).await;
        assert_error(&answer, 400, "websocket_upgrade_required");
    }
}

#[tokio::test]
async fn the_concurrency_limit_is_503() {
    let api = Api::new(
        "rest_cherrypy:\n  port: 8000\n  disable_ssl: true\n  brine_max_concurrent_requests: 1\n",
    );
    api.state
        .metrics
        .in_flight
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let answer = api.call(req("GET", "/").body(Body::empty()).unwrap()).await;
    assert_error(&answer, 503, "unavailable");
}

#[tokio::test]
async fn hook_and_stats_skip_authentication_when_configured() {
    let api = Api::new(
        "rest_cherrypy:\n  port: 8000\n  disable_ssl: true\n  webhook_disable_auth: true\n  stats_disable_auth: true\n",
    );
    for request in [
        json_req("POST", "/hook/a", Some("bogus"), &json!({"x": 1})),
        req("GET", "/stats")
            .header("x-auth-token", "bogus")
            .body(Body::empty())
            .unwrap(),
    ] {
        let (status, _, body) = api.call(request).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
}

#[tokio::test]
async fn a_master_that_answers_nonsense_is_503() {
    // 0xc1 is never valid MessagePack.
    let api = Api::with_ret_port("", support::fake_master(b"\xc1"));
    let token = api.token("admin");
    for request in [
        json_req("POST", "/", Some(&token), &ping()),
        json_req(
            "POST",
            "/",
            Some(&token),
            &json!({"client": "runner", "fun": "jobs.list_jobs"}),
        ),
        req("GET", "/minions")
            .header("x-auth-token", &token)
            .body(Body::empty())
            .unwrap(),
        req("GET", "/keys")
            .header("x-auth-token", &token)
            .body(Body::empty())
            .unwrap(),
    ] {
        let answer = api.call(request).await;
        let message = assert_error(&answer, 503, "unavailable");
        assert!(message.contains("the master"), "{message}");
    }
}
