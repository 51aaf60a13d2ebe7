//! SMS and push providers end to end: a workflow step delivers through each provider's real API format to a
//! local [`Receiver`] standing in for the provider (its address given as the `baseUrl` credential, and for
//! FCM also as the service account's `token_uri`), and the test checks the exact request, the job's
//! execution details and the message record.

use base64::Engine as _;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::db_test;
use crate::support::receiver::{Received, Receiver, Reply};
use crate::support::{deliver_one, only_post, replying_once, TestApp};

/// A throwaway 2048-bit RSA key made with `openssl genrsa 2048` for these tests only: it signs the FCM
/// service account's JWT in tests and is not, and never was, a key of any real account.
const TEST_ONLY_RSA_PRIVATE_KEY: &str = "-----BEGIN PRIVATE KEY-----\n\
MIIEvAIBADANBgkqhkiG9w0BAQEFAASCBKYwggSiAgEAAoIBAQDVGCewwgiqZvXq\n\
J/58OgdCvqZ/0utcE74I56hPysWZXEo5MYRHPU/9ZZIdKKyrofZQTYJx8cmXrrUu\n\
aElPwUnyX2frZ/wq3TASaeWFZlXw1ZW8tbS+c45td2tqBDt4Yb5w1ZvODAsKtnmi\n\
sezdmxXVxD98l9ny8OL2/qfZ+6xU7LvUE2Lj5y04wlUPu8y2qa7WgoZsWz02d4xM\n\
3P5TNg4k3Z1TB65tzBnZfmfoaiI4zzhhTTFRgMjCv5AYBxEPtogvkxR2u9eRWzrA\n\
SSTeZoWikH23QKusNOnZvSjywTh5pw/4qx9ig53IjPAidT0J6F69ji11eGPxp7Hh\n\
ZrjBcNr/AgMBAAECggEAQOUyzS9CQVbKxG06oK1xYZ+7CAl9WNTAVmjqRqaLh9ll\n\
10YfsSxYbGSe21d0Qm64GxuHwtiuGo3/qmrjDLFiKjho5vWLg6hJyAnM9tPED2yU\n\
RdyWdzus3+Ry513zmIU34JgE83qScEhDAcuqxZBB1ZCG/xQlsUkv7aV/C7EL+e5x\n\
ujYn02pwffFccKv5RdQMRmT3q0h3ldmAP22/CTXBwOVr8I4wjb3CA1vuSXV1uOQC\n\
fmcJAXaqKL0Vn5Rj59Pq0LdaZ8Rw09ERz3LXZBjYfgMU+sCuE091rDutwk7c45fr\n\
MS92LIta/7FE4tJrWIZiZ1zgj3bdY4NqdBb+se57+QKBgQD+gVqN0WmzfTaulGPf\n\
bMkScQvz3609rUYFdOWqXlb8/yo7Jz1g61F7R/xsHYWZgd69nii0iUWTSWmfTIYk\n\
CbudI+7lom0qu4mpmIYXmP21dq+pMFDDot5uekE0i64vDMiEEhNe/0O+ICjoHn4T\n\
dAVglgzahRJOy15udcYJMKuISQKBgQDWWIpV2bxBroqMebWMkMxMdIgFsn9JDC8l\n\
ad5zgRAAQK3jroLTNxfMxldfJiARAxt044kohi2ugDA7bKt8GfkC9YAc6LQgQ9pi\n\
OPXhHcWrmR8fbH/a9BVrTHvE0Olfmfhc4IYY9JTCeF7xzhb7rgRbETCORupNHrvb\n\
VRXnkukZBwKBgB9gs1loyC9o8KT1hpq1PtUXOvIGUcWY51kk4Gvw1ai7jOleHSMl\n\
4BXi+iwaN66FZIDcTwhzJDDUjEEnniIzUP4+v+Vv8SWjmYVfWKjwI9eLmnyxiEOW\n\
gPX9/KwNzJvgZ5hg4iKENkXqkSCNId4kH8WYulz2qxsr16imvJPFfGCBAoGACDqV\n\
9P3K8GqW/xWdFqxoa3b90doscM168eDCnYSS7K+O/XKxqxIuY7opmImKKZ0I7M/f\n\
cCLWliBtuZpOaxFEMgziwjlc0PBJ7gNpzR6rfA8A1t//eJRuThQ9nCy5COaMVmR4\n\
QXUCUQT2ACp9T2Q63pQmXQ/z5soLRDxb/uvw7vkCgYAC2i42+GLZ5u55pTbSMOq/\n\
hXybLEX89V9Jk9Qydh99EkKPdfQSOJX4TNGr6vyk1EBVEBvN1Qj6dwkAcR49KmNx\n\
KKryCVvYuf9mAo2IvxjL0lZ7qdg/YcVYkXti3N7D0CHp9bL1ACFs2eqfmIE5Tthy\n\
7W6asC0bS3jQdpsoK4PtsA==\n\
-----END PRIVATE KEY-----\n";

/// The public half of [`TEST_ONLY_RSA_PRIVATE_KEY`], to verify the JWT's signature.
const TEST_ONLY_RSA_PUBLIC_KEY: &str = "-----BEGIN PUBLIC KEY-----\n\
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA1RgnsMIIqmb16if+fDoH\n\
Qr6mf9LrXBO+COeoT8rFmVxKOTGERz1P/WWSHSisq6H2UE2CcfHJl661LmhJT8FJ\n\
8l9n62f8Kt0wEmnlhWZV8NWVvLW0vnOObXdragQ7eGG+cNWbzgwLCrZ5orHs3ZsV\n\
1cQ/fJfZ8vDi9v6n2fusVOy71BNi4+ctOMJVD7vMtqmu1oKGbFs9NneMTNz+UzYO\n\
JN2dUweubcwZ2X5n6GoiOM84YU0xUYDIwr+QGAcRD7aIL5MUdrvXkVs6wEkk3maF\n\
opB9t0CrrDTp2b0o8sE4eacP+KsfYoOdyIzwInU9CehevY4tdXhj8aex4Wa4wXDa\n\
/wIDAQAB\n\
-----END PUBLIC KEY-----\n";

const CLIENT_EMAIL: &str = "tidings-test@demo-project.iam.gserviceaccount.com";

fn basic(user: &str, password: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

/// The job's execution details of `status`.
fn details(job: &Value, status: &str) -> Vec<Value> {
    job["executionDetails"]
        .as_array()
        .unwrap_or_else(|| panic!("no executionDetails: {job}"))
        .iter()
        .filter(|d| d["status"] == status)
        .cloned()
        .collect()
}

/// Asserts the job completed through `provider` and the message was recorded as sent; returns the
/// Success detail.
fn assert_sent(job: &Value, message: &Value, provider: &str) -> Value {
    assert_eq!(job["status"], "completed", "{job}");
    let success = details(job, "Success");
    assert_eq!(success.len(), 1, "{job}");
    assert_eq!(success[0]["providerId"], provider, "{job}");
    assert_eq!(success[0]["source"], "Credentials");
    assert!(details(job, "Failed").is_empty(), "{job}");
    assert_eq!(message["status"], "sent", "{message}");
    assert_eq!(message["providerId"], provider, "{message}");
    assert!(
        message["deliveredAt"]
            .as_array()
            .is_some_and(|d| d.len() == 1 && d[0].as_str().is_some_and(|t| !t.is_empty())),
        "{message}"
    );
    success[0].clone()
}

/// [`assert_sent`], and the Success detail reports the provider's message `id`.
fn assert_sent_with_id(job: &Value, message: &Value, provider: &str, id: &str) -> Value {
    let success = assert_sent(job, message, provider);
    let detail = format!("Message sent by {provider} (id {id})");
    assert_eq!(success["detail"], detail.as_str());
    success
}

/// [`assert_sent_with_id`] for the SMS to ann's phone.
fn assert_sms_sent(job: &Value, message: &Value, provider: &str, id: &str) -> Value {
    let success = assert_sent_with_id(job, message, provider, id);
    assert_eq!(message["phone"], "+15550001111");
    success
}

/// An active `channel` integration `identifier` of `provider` with `credentials`.
async fn integration(
    app: &TestApp,
    (provider, channel, identifier): (&str, &str, &str),
    credentials: Value,
) {
    app.integration(
        json!({"providerId": provider, "channel": channel, "identifier": identifier,
        "active": true, "credentials": credentials}),
    )
    .await;
}

/// The Twilio integration `twilio-main` at the receiver.
async fn twilio(app: &TestApp, receiver: &Receiver) {
    let credentials = json!({"accountSid": "AC0123456789", "token": "twilio-auth-token",
        "from": "+15550009999", "baseUrl": receiver.url});
    integration(app, ("twilio", "sms", "twilio-main"), credentials).await;
}

/// Triggers the SMS step to ann; returns the job and the message.
async fn send_sms(app: &TestApp) -> (Value, Value) {
    deliver_one(app, "sms", sms_controls(), sms_trigger()).await
}

/// The request's body is the JSON `expected`, sent as `application/json`.
fn assert_json(r: &Received, expected: Value) {
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.json(), expected);
}

fn sms_controls() -> Value {
    json!({"body": "Code {{payload.code}}"})
}

fn sms_trigger() -> Value {
    json!({"to": {"subscriberId": "ann", "phone": "+15550001111"}, "payload": {"code": "1234"}})
}

fn push_controls() -> Value {
    json!({"subject": "Hello {{payload.name}}", "body": "Code {{payload.code}}"})
}

/// Triggers the push step with `trigger`; returns the job and the message.
async fn send_push(app: &TestApp, trigger: Value) -> (Value, Value) {
    deliver_one(app, "push", push_controls(), trigger).await
}

fn push_trigger() -> Value {
    json!({"to": {"subscriberId": "ann"}, "payload": {"name": "Ann", "code": "1234"}})
}

/// Creates subscriber `id` with `tokens` as its device tokens for `provider` through `integration`.
async fn with_tokens(app: &TestApp, id: &str, provider: &str, integration: &str, tokens: &[&str]) {
    app.subscriber(id, json!({})).await;
    let (status, body) = app
        .put(
            &format!("/v1/subscribers/{id}/credentials"),
            json!({"providerId": provider, "integrationIdentifier": integration,
                   "credentials": {"deviceTokens": tokens}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// The subscriber's device tokens for `provider`, as `GET /v2/subscribers/{id}` shows them.
async fn device_tokens(app: &TestApp, id: &str, provider: &str) -> Vec<String> {
    let (status, s) = app.get(&format!("/v2/subscribers/{id}")).await;
    assert_eq!(status, StatusCode::OK, "{s}");
    s["channels"]
        .as_array()
        .unwrap_or_else(|| panic!("no channels: {s}"))
        .iter()
        .filter(|c| c["providerId"] == provider)
        .flat_map(|c| {
            c["credentials"]["deviceTokens"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|t| t.as_str().unwrap().to_owned())
        .collect()
}

// ---------------------------------------------------------------------------------------------- SMS

async fn twilio_sends_a_form_with_basic_auth(app: TestApp) {
    let receiver = replying_once(Reply::json(
        201,
        json!({"sid": "SM0001", "status": "queued"}),
    ))
    .await;
    twilio(&app, &receiver).await;
    let (job, message) = send_sms(&app).await;
    let r = only_post(&receiver, "/2010-04-01/Accounts/AC0123456789/Messages.json").await;
    assert_eq!(
        r.header("authorization"),
        Some(basic("AC0123456789", "twilio-auth-token").as_str())
    );
    assert_eq!(
        r.header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    let mut form = r.form();
    form.sort();
    assert_eq!(
        form,
        [
            ("Body".to_owned(), "Code 1234".to_owned()),
            ("From".to_owned(), "+15550009999".to_owned()),
            ("To".to_owned(), "+15550001111".to_owned()),
        ]
    );
    let success = assert_sms_sent(&job, &message, "twilio", "SM0001");
    assert_eq!(message["content"], "Code 1234");
    // The recorded answer has no secret in it.
    assert!(!success["raw"]
        .as_str()
        .unwrap()
        .contains("twilio-auth-token"));
}
db_test!(twilio, twilio_sends_a_form_with_basic_auth);

async fn plivo_sends_json_with_basic_auth(app: TestApp) {
    let receiver = replying_once(Reply::json(
        202,
        json!({"api_id": "a1", "message": "message(s) queued", "message_uuid": ["uuid-77"]}),
    ))
    .await;
    let credentials = json!({"accountSid": "MAXXXXXXXX", "token": "plivo-auth-token",
        "from": "+15550009999", "baseUrl": receiver.url});
    integration(&app, ("plivo", "sms", "plivo-main"), credentials).await;
    let (job, message) = send_sms(&app).await;
    let r = only_post(&receiver, "/v1/Account/MAXXXXXXXX/Message/").await;
    assert_eq!(
        r.header("authorization"),
        Some(basic("MAXXXXXXXX", "plivo-auth-token").as_str())
    );
    assert_json(
        &r,
        json!({"src": "+15550009999", "dst": "+15550001111", "text": "Code 1234"}),
    );
    assert_sms_sent(&job, &message, "plivo", "uuid-77");
}
db_test!(plivo, plivo_sends_json_with_basic_auth);

async fn telnyx_sends_json_with_a_bearer_key(app: TestApp) {
    let id = "40385f64-5717-4562-b3fc-2c963f66afa6";
    let answer = json!({"data": {"id": id, "record_type": "message"}});
    let receiver = replying_once(Reply::json(200, answer)).await;
    let credentials = json!({"apiKey": "KEY-telnyx-secret", "from": "+15550009999",
        "messageProfileId": "profile-1", "baseUrl": receiver.url});
    integration(&app, ("telnyx", "sms", "telnyx-main"), credentials).await;
    let (job, message) = send_sms(&app).await;
    let r = only_post(&receiver, "/v2/messages").await;
    assert_eq!(r.header("authorization"), Some("Bearer KEY-telnyx-secret"));
    assert_eq!(
        r.json(),
        json!({"from": "+15550009999", "to": "+15550001111", "text": "Code 1234",
               "messaging_profile_id": "profile-1"})
    );
    assert_sms_sent(&job, &message, "telnyx", id);
}
db_test!(telnyx, telnyx_sends_json_with_a_bearer_key);

async fn generic_sms_uses_the_configured_headers_and_paths(app: TestApp) {
    let receiver = replying_once(Reply::json(
        200,
        json!({"result": {"messageId": "g-77", "sentAt": "2024-05-01T10:00:00Z"}}),
    ))
    .await;
    let credentials = json!({"baseUrl": format!("{}/sms/send", receiver.url), "from": "Acme",
        "apiKeyRequestHeader": "x-api-key", "apiKey": "gateway-api-key",
        "secretKeyRequestHeader": "x-api-secret", "secretKey": "gateway-secret",
        "idPath": "result.messageId", "datePath": "result.sentAt"});
    integration(&app, ("generic-sms", "sms", "gateway"), credentials).await;
    let (job, message) = send_sms(&app).await;
    let r = only_post(&receiver, "/sms/send").await;
    assert_eq!(r.header("x-api-key"), Some("gateway-api-key"));
    assert_eq!(r.header("x-api-secret"), Some("gateway-secret"));
    assert_json(
        &r,
        json!({"to": "+15550001111", "content": "Code 1234", "from": "Acme", "sender": "Acme"}),
    );
    let success = assert_sms_sent(&job, &message, "generic-sms", "g-77");
    let raw: Value = serde_json::from_str(success["raw"].as_str().unwrap()).unwrap();
    assert_eq!(raw["messageId"], "g-77");
    assert_eq!(raw["date"], "2024-05-01T10:00:00Z");
    assert_eq!(raw["status"], 200);
    assert_eq!(message["phone"], "+15550001111");
}
db_test!(
    generic_sms,
    generic_sms_uses_the_configured_headers_and_paths
);

async fn sms_goes_to_a_phone_endpoint_when_the_subscriber_has_no_phone(app: TestApp) {
    let receiver = replying_once(Reply::json(201, json!({"sid": "SM0002"}))).await;
    twilio(&app, &receiver).await;
    app.subscriber("bob", json!({})).await;
    let (status, e) = app
        .post(
            "/v1/channel-endpoints",
            json!({"type": "phone", "endpoint": {"phoneNumber": "+15550002222"},
                   "integrationIdentifier": "twilio-main", "subscriberId": "bob"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{e}");
    let (job, message) = deliver_one(
        &app,
        "sms",
        sms_controls(),
        json!({"to": {"subscriberId": "bob"}, "payload": {"code": "9876"}}),
    )
    .await;
    let sent = receiver.wait_for(1).await;
    assert_eq!(sent[0].form_value("To").as_deref(), Some("+15550002222"));
    assert_eq!(sent[0].form_value("Body").as_deref(), Some("Code 9876"));
    assert_sent(&job, &message, "twilio");
    assert_eq!(message["phone"], "+15550002222");
}
db_test!(
    sms_phone_endpoint,
    sms_goes_to_a_phone_endpoint_when_the_subscriber_has_no_phone
);

// ---------------------------------------------------------------------------------------------- FCM

/// A service account JSON key whose token endpoint is the receiver.
fn service_account(receiver: &Receiver) -> String {
    json!({
        "type": "service_account",
        "project_id": "demo-project",
        "private_key_id": "test-key-1",
        "private_key": TEST_ONLY_RSA_PRIVATE_KEY,
        "client_email": CLIENT_EMAIL,
        "client_id": "100000000000000000001",
        "token_uri": format!("{}/token", receiver.url),
    })
    .to_string()
}

async fn fcm_integration(app: &TestApp, receiver: &Receiver) {
    let credentials = json!({"serviceAccount": service_account(receiver), "baseUrl": receiver.url});
    integration(app, ("fcm", "push", "fcm-main"), credentials).await;
}

fn token_reply() -> Reply {
    Reply::json(
        200,
        json!({"access_token": "ya29.test", "expires_in": 3600, "token_type": "Bearer"}),
    )
}

/// Checks the token exchange: a JWT-bearer grant whose assertion is an RS256 JWT of the service account,
/// signed with its key.
fn assert_token_exchange(r: &Received, receiver: &Receiver) {
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/token");
    assert_eq!(
        r.header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    assert_eq!(
        r.form_value("grant_type").as_deref(),
        Some("urn:ietf:params:oauth:grant-type:jwt-bearer")
    );
    let jwt = r.form_value("assertion").expect("assertion");
    let parts: Vec<&str> = jwt.split('.').collect();
    assert_eq!(parts.len(), 3, "{jwt}");
    let decode = |part: &str| -> Value {
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(part)
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    };
    let header = decode(parts[0]);
    assert_eq!(header["alg"], "RS256", "{header}");
    assert_eq!(header["typ"], "JWT", "{header}");
    assert_eq!(header["kid"], "test-key-1", "{header}");
    let claims = decode(parts[1]);
    let token_uri = format!("{}/token", receiver.url);
    assert_eq!(claims["iss"], CLIENT_EMAIL, "{claims}");
    assert_eq!(
        claims["scope"],
        "https://www.googleapis.com/auth/firebase.messaging"
    );
    assert_eq!(claims["aud"], token_uri.as_str());
    let iat = claims["iat"].as_i64().unwrap();
    assert_eq!(claims["exp"].as_i64().unwrap() - iat, 3600);
    assert!(
        (iat - chrono::Utc::now().timestamp()).abs() < 120,
        "{claims}"
    );
    // The signature verifies with the service account's public key.
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
    validation.set_audience(&[token_uri.as_str()]);
    validation.set_issuer(&[CLIENT_EMAIL]);
    jsonwebtoken::decode::<Value>(
        &jwt,
        &jsonwebtoken::DecodingKey::from_rsa_pem(TEST_ONLY_RSA_PUBLIC_KEY.as_bytes()).unwrap(),
        &validation,
    )
    .expect("the assertion is signed with the service account's key");
}

fn fcm_ok(n: u32) -> Reply {
    Reply::json(
        200,
        json!({"name": format!("projects/demo-project/messages/0:{n}")}),
    )
}

async fn fcm_exchanges_a_jwt_and_sends_one_request_per_token(app: TestApp) {
    let receiver = Receiver::start().await;
    receiver.reply([token_reply(), fcm_ok(1), fcm_ok(2), fcm_ok(3)]);
    fcm_integration(&app, &receiver).await;
    with_tokens(&app, "ann", "fcm", "fcm-main", &["tok-1", "tok-2"]).await;
    let mut trigger = push_trigger();
    trigger["payload"]["count"] = json!(3);
    trigger["overrides"] = json!({"providers": {"fcm": {
        "android": {"priority": "high"},
        "apns": {"payload": {"aps": {"badge": 1}}},
        "fcmOptions": {"analytics_label": "welcome"}}}});
    let (job, message) = send_push(&app, trigger).await;
    let sent = receiver.wait_for(3).await;
    assert_eq!(sent.len(), 3, "{job}");
    assert_token_exchange(&sent[0], &receiver);
    for (r, token) in sent[1..].iter().zip(["tok-1", "tok-2"]) {
        assert_eq!(r.method, "POST");
        assert_eq!(r.path, "/v1/projects/demo-project/messages:send");
        assert_eq!(r.header("authorization"), Some("Bearer ya29.test"));
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(
            r.json(),
            json!({"message": {
                "token": token,
                "notification": {"title": "Hello Ann", "body": "Code 1234"},
                "data": {"name": "Ann", "code": "1234", "count": "3"},
                "android": {"priority": "high"},
                "apns": {"payload": {"aps": {"badge": 1}}},
                "fcm_options": {"analytics_label": "welcome"}
            }})
        );
    }
    let success = assert_sent_with_id(&job, &message, "fcm", "projects/demo-project/messages/0:1");
    let raw = success["raw"].as_str().unwrap();
    assert!(!raw.contains("BEGIN PRIVATE KEY"), "{raw}");
    assert_eq!(message["deviceTokens"], json!(["tok-1", "tok-2"]));
    assert_eq!(message["subject"], "Hello Ann");

    // The access token is reused: a second push makes no new token exchange.
    with_tokens(&app, "cy", "fcm", "fcm-main", &["tok-3"]).await;
    let mut trigger = push_trigger();
    trigger["to"] = json!({"subscriberId": "cy"});
    let (job, message) = send_push(&app, trigger).await;
    assert_sent(&job, &message, "fcm");
    let sent = receiver.wait_for(4).await;
    assert_eq!(sent.len(), 4);
    assert_eq!(sent[3].path, "/v1/projects/demo-project/messages:send");
    assert_eq!(sent[3].json()["message"]["token"], "tok-3");
}
db_test!(fcm, fcm_exchanges_a_jwt_and_sends_one_request_per_token);

fn fcm_unregistered() -> Reply {
    Reply::json(
        404,
        json!({"error": {"code": 404, "message": "Requested entity was not found.", "status": "NOT_FOUND",
            "details": [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": "UNREGISTERED"}]}}),
    )
}

async fn fcm_invalid_tokens_are_removed_from_the_subscriber(app: TestApp) {
    let receiver = Receiver::start().await;
    receiver.reply([
        token_reply(),
        fcm_ok(1),
        fcm_unregistered(),
        Reply::json(
            400,
            json!({"error": {"code": 400, "message": "The registration token is not a valid FCM registration token",
                "status": "INVALID_ARGUMENT",
                "details": [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": "INVALID_ARGUMENT"}]}}),
        ),
    ]);
    fcm_integration(&app, &receiver).await;
    with_tokens(
        &app,
        "ann",
        "fcm",
        "fcm-main",
        &["tok-good", "tok-gone", "tok-bad"],
    )
    .await;
    let (job, message) = send_push(&app, push_trigger()).await;
    assert_eq!(receiver.wait_for(4).await.len(), 4);
    assert_sent(&job, &message, "fcm");
    let warnings = details(&job, "Warning");
    assert_eq!(warnings.len(), 1, "{job}");
    assert_eq!(
        warnings[0]["detail"],
        "fcm reported 2 invalid device token(s); removed from the subscriber"
    );
    assert_eq!(warnings[0]["providerId"], "fcm");
    assert_eq!(device_tokens(&app, "ann", "fcm").await, ["tok-good"]);
}
db_test!(
    fcm_invalid_tokens,
    fcm_invalid_tokens_are_removed_from_the_subscriber
);

async fn fcm_fails_permanently_when_every_token_is_invalid(app: TestApp) {
    let receiver = Receiver::start().await;
    receiver.reply([token_reply(), fcm_unregistered()]);
    fcm_integration(&app, &receiver).await;
    with_tokens(&app, "ann", "fcm", "fcm-main", &["tok-gone"]).await;
    let (job, message) = send_push(&app, push_trigger()).await;
    assert_eq!(job["status"], "failed", "{job}");
    // Permanent: no retry.
    assert_eq!(receiver.requests().len(), 2);
    let failed = details(&job, "Failed");
    assert!(
        failed.iter().any(|d| d["detail"]
            .as_str()
            .unwrap()
            .contains("FCM reported every device token (1) invalid or unregistered")),
        "{job}"
    );
    assert_eq!(message["status"], "error", "{message}");
}
db_test!(
    fcm_all_invalid,
    fcm_fails_permanently_when_every_token_is_invalid
);

async fn push_without_device_tokens_fails_without_calling_the_provider(app: TestApp) {
    let receiver = Receiver::start().await;
    fcm_integration(&app, &receiver).await;
    app.subscriber("ann", json!({})).await;
    let (job, message) = send_push(&app, push_trigger()).await;
    assert_eq!(job["status"], "failed", "{job}");
    let failed = details(&job, "Failed");
    assert!(!failed.is_empty(), "{job}");
    assert!(
        failed
            .iter()
            .all(|d| d["detail"] == "Subscriber ann has no device tokens for fcm"),
        "{job}"
    );
    assert!(receiver.requests().is_empty());
    assert_eq!(message["status"], "error", "{message}");
    assert_eq!(message["errorId"], "missing_device_tokens", "{message}");
}
db_test!(
    push_no_tokens,
    push_without_device_tokens_fails_without_calling_the_provider
);

// ---------------------------------------------------------------------------------------------- Expo

async fn expo_sends_one_message_per_token_and_drops_unregistered_ones(app: TestApp) {
    let answer = json!({"data": [
        {"status": "ok", "id": "ticket-1"},
        {"status": "error", "message": "\"ExponentPushToken[bbb]\" is not a registered push notification recipient",
         "details": {"error": "DeviceNotRegistered", "expoPushToken": "ExponentPushToken[bbb]"}}
    ]});
    let receiver = replying_once(Reply::json(200, answer)).await;
    let credentials = json!({"apiKey": "expo-access-token", "baseUrl": receiver.url});
    integration(&app, ("expo", "push", "expo-main"), credentials).await;
    with_tokens(
        &app,
        "ann",
        "expo",
        "expo-main",
        &["ExponentPushToken[aaa]", "ExponentPushToken[bbb]"],
    )
    .await;
    let mut trigger = push_trigger();
    trigger["overrides"] =
        json!({"providers": {"expo": {"sound": "default", "badge": 2, "ttl": 60}}});
    let (job, message) = send_push(&app, trigger).await;
    let r = only_post(&receiver, "/--/api/v2/push/send").await;
    assert_eq!(r.header("authorization"), Some("Bearer expo-access-token"));
    let one = |to: &str| {
        json!({"to": to, "title": "Hello Ann", "body": "Code 1234",
               "data": {"name": "Ann", "code": "1234"}, "sound": "default", "badge": 2, "ttl": 60})
    };
    assert_json(
        &r,
        json!([one("ExponentPushToken[aaa]"), one("ExponentPushToken[bbb]")]),
    );
    assert_sent_with_id(&job, &message, "expo", "ticket-1");
    assert_eq!(
        details(&job, "Warning")[0]["detail"],
        "expo reported 1 invalid device token(s); removed from the subscriber"
    );
    assert_eq!(
        message["deviceTokens"],
        json!(["ExponentPushToken[aaa]", "ExponentPushToken[bbb]"])
    );
    assert_eq!(
        device_tokens(&app, "ann", "expo").await,
        ["ExponentPushToken[aaa]"]
    );
}
db_test!(
    expo,
    expo_sends_one_message_per_token_and_drops_unregistered_ones
);

// ---------------------------------------------------------------------------------------------- OneSignal

async fn one_signal_targets_subscription_ids(app: TestApp) {
    let id = "b98881cc-1e94-4366-bbd9-db8f3429292b";
    let answer = json!({"id": id, "external_id": null,
               "errors": {"invalid_player_ids": ["sub-2"]}});
    let receiver = replying_once(Reply::json(200, answer)).await;
    let credentials = json!({"apiKey": "onesignal-rest-key", "applicationId": "app-0001",
        "baseUrl": receiver.url});
    integration(&app, ("one-signal", "push", "onesignal-main"), credentials).await;
    with_tokens(
        &app,
        "ann",
        "one-signal",
        "onesignal-main",
        &["sub-1", "sub-2"],
    )
    .await;
    let (job, message) = send_push(&app, push_trigger()).await;
    let r = only_post(&receiver, "/api/v1/notifications").await;
    assert_eq!(r.header("authorization"), Some("Basic onesignal-rest-key"));
    assert_json(
        &r,
        json!({"app_id": "app-0001", "include_subscription_ids": ["sub-1", "sub-2"],
               "headings": {"en": "Hello Ann"}, "contents": {"en": "Code 1234"},
               "data": {"name": "Ann", "code": "1234"}}),
    );
    assert_sent_with_id(&job, &message, "one-signal", id);
    assert_eq!(message["deviceTokens"], json!(["sub-1", "sub-2"]));
    assert_eq!(device_tokens(&app, "ann", "one-signal").await, ["sub-1"]);
}
db_test!(one_signal, one_signal_targets_subscription_ids);

// ---------------------------------------------------------------------------------------------- trigger `to.channels`

/// A subscriber object in a trigger's `to` may carry `channels`: they are stored as
/// `PATCH /v1/subscribers/{id}/credentials` stores them (tokens added), and the push step of that very trigger
/// delivers to the given device token.
async fn trigger_recipient_channels_are_stored_and_used(app: TestApp) {
    let ok = |id: &str| Reply::json(200, json!({"data": [{"status": "ok", "id": id}]}));
    let receiver = Receiver::start().await;
    receiver.reply([
        ok("ticket-1"),
        Reply::json(
            200,
            json!({"data": [{"status": "ok", "id": "ticket-2"}, {"status": "ok", "id": "ticket-3"}]}),
        ),
    ]);
    let credentials = json!({"apiKey": "expo-access-token", "baseUrl": receiver.url});
    integration(&app, ("expo", "push", "expo-main"), credentials).await;
    let to = |token: &str| {
        json!({"subscriberId": "dan", "firstName": "Dan", "channels": [{
            "providerId": "expo", "integrationIdentifier": "expo-main",
            "credentials": {"deviceTokens": [token]}}]})
    };
    let mut trigger = push_trigger();
    trigger["to"] = to("ExponentPushToken[ddd]");
    let (job, message) = send_push(&app, trigger).await;
    let sent = receiver.wait_for(1).await;
    assert_eq!(sent[0].path, "/--/api/v2/push/send");
    assert_eq!(sent[0].json()[0]["to"], "ExponentPushToken[ddd]", "{job}");
    assert_sent_with_id(&job, &message, "expo", "ticket-1");
    assert_eq!(message["deviceTokens"], json!(["ExponentPushToken[ddd]"]));
    let (_, dan) = app.get("/v2/subscribers/dan").await;
    assert_eq!(dan["firstName"], "Dan");
    let expo_channels: Vec<&Value> = dan["channels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["providerId"] == "expo")
        .collect();
    assert_eq!(expo_channels.len(), 1, "{dan}");
    assert_eq!(expo_channels[0]["integrationIdentifier"], "expo-main");
    assert_eq!(
        expo_channels[0]["credentials"]["deviceTokens"],
        json!(["ExponentPushToken[ddd]"])
    );

    // A second trigger adds its token to the stored one; the push goes to both.
    let mut trigger = push_trigger();
    trigger["to"] = json!([to("ExponentPushToken[eee]")]);
    let (job, message) = send_push(&app, trigger).await;
    let sent = receiver.wait_for(2).await;
    let body = sent[1].json();
    let targets: Vec<&str> = body
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["to"].as_str().unwrap())
        .collect();
    assert_eq!(
        targets,
        ["ExponentPushToken[ddd]", "ExponentPushToken[eee]"]
    );
    assert_sent(&job, &message, "expo");
    assert_eq!(
        device_tokens(&app, "dan", "expo").await,
        ["ExponentPushToken[ddd]", "ExponentPushToken[eee]"]
    );

    // Bad channels: the credentials routes' rules, every problem at once, nothing triggered or stored.
    let (status, out) = app
        .post(
            "/v2/workflows",
            json!({"name": "Push", "workflowId": "push-note",
                "steps": [{"name": "Send", "type": "push", "controlValues": push_controls()}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let (status, err) = app
        .post(
            "/v1/events/trigger",
            json!({"name": "push-note", "to": [
                "dan",
                {"subscriberId": "eve", "channels": [
                    {"providerId": "carrier-pigeon", "credentials": {"deviceTokens": ["t"]}},
                    {"providerId": "expo", "credentials": {"deviceTokens": "t"}}]}]}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
    assert_eq!(
        err["errors"],
        json!({
            "to[1].channels[0].providerId": {
                "messages": ["to[1].channels[0].providerId must be a valid chat or push provider ID: \"carrier-pigeon\" is not one"],
                "value": "carrier-pigeon"},
            "to[1].channels[1].credentials.deviceTokens": {
                "messages": ["to[1].channels[1].credentials.deviceTokens must be an array of strings"],
                "value": "t"},
        }),
        "{err}"
    );
    let (status, _) = app.get("/v2/subscribers/eve").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // A provider without an active integration: as the credentials route answers.
    let (status, err) = app
        .post(
            "/v1/events/trigger",
            json!({"name": "push-note", "to": {"subscriberId": "dan", "channels": [
                {"providerId": "fcm", "credentials": {"deviceTokens": ["t"]}}]}}),
        )
        .await;
    let (route_status, route_err) = app
        .put(
            "/v1/subscribers/dan/credentials",
            json!({"providerId": "fcm", "credentials": {"deviceTokens": ["t"]}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    assert_eq!(
        (status, &err["message"]),
        (route_status, &route_err["message"])
    );
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("active fcm integration"),
        "{err}"
    );
}
db_test!(
    trigger_channels,
    trigger_recipient_channels_are_stored_and_used
);
