//! Cursor pagination (design.md §3) on the subscriber search: pages walked both ways, cursors, limits,
//! ordering, and the capped total count.

use reqwest::StatusCode;
use serde_json::Value;

use crate::db_test;
use crate::support::{assert_error, TestApp};

fn subscriber_ids(page: &Value) -> Vec<String> {
    page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["subscriberId"].as_str().unwrap().to_owned())
        .collect()
}

fn names(range: impl Iterator<Item = i64>) -> Vec<String> {
    range.map(|i| format!("p{i}")).collect()
}

async fn pages_walk_forwards_and_backwards(app: TestApp) {
    assert_eq!(
        app.store
            .seed_subscribers(&app.tenant, "p", 25)
            .await
            .unwrap(),
        25
    );
    let mut pages = Vec::new();
    let mut url = "/v2/subscribers?limit=7".to_owned();
    loop {
        let (status, page) = app.get(&url).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        assert_eq!(page["totalCount"], 25);
        assert_eq!(page["totalCountCapped"], false);
        let next = page["next"].as_str().map(str::to_owned);
        pages.push(page);
        match next {
            Some(cursor) => url = format!("/v2/subscribers?limit=7&after={cursor}"),
            None => break,
        }
    }
    // Default order: newest `_id` first.
    let expected = [
        names((19..=25).rev()),
        names((12..=18).rev()),
        names((5..=11).rev()),
        names((1..=4).rev()),
    ];
    assert_eq!(pages.len(), 4);
    for (page, want) in pages.iter().zip(&expected) {
        assert_eq!(&subscriber_ids(page), want);
    }
    let first_id = |p: &Value| p["data"][0]["_id"].as_str().unwrap().to_owned();
    let last_id = |p: &Value| {
        p["data"].as_array().unwrap().last().unwrap()["_id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    // next = last item's id when more follow; previous = first item's id when any precede.
    assert_eq!(pages[0]["previous"], Value::Null);
    assert_eq!(pages[0]["next"].as_str().unwrap(), last_id(&pages[0]));
    for p in &pages[1..3] {
        assert_eq!(p["previous"].as_str().unwrap(), first_id(p));
        assert_eq!(p["next"].as_str().unwrap(), last_id(p));
    }
    assert_eq!(pages[3]["next"], Value::Null);
    assert_eq!(pages[3]["previous"].as_str().unwrap(), first_id(&pages[3]));

    // Backwards from the last page with `before` reproduces the same pages.
    let mut cursor = pages[3]["previous"].as_str().unwrap().to_owned();
    for i in (0..3).rev() {
        let (_, page) = app
            .get(&format!("/v2/subscribers?limit=7&before={cursor}"))
            .await;
        assert_eq!(subscriber_ids(&page), expected[i], "page {i} walking back");
        assert_eq!(page["next"].as_str().unwrap(), last_id(&page));
        if i == 0 {
            assert_eq!(page["previous"], Value::Null);
        } else {
            cursor = page["previous"].as_str().unwrap().to_owned();
        }
    }

    // includeCursor keeps the cursor item.
    let cursor = pages[0]["next"].as_str().unwrap();
    let (_, page) = app
        .get(&format!(
            "/v2/subscribers?limit=3&after={cursor}&includeCursor=true"
        ))
        .await;
    assert_eq!(subscriber_ids(&page), ["p19", "p18", "p17"]);
    let (_, page) = app
        .get(&format!(
            "/v2/subscribers?limit=3&before={cursor}&includeCursor=true"
        ))
        .await;
    assert_eq!(subscriber_ids(&page), ["p21", "p20", "p19"]);

    // Ascending by createdAt.
    let (_, page) = app
        .get("/v2/subscribers?limit=5&orderBy=createdAt&orderDirection=ASC")
        .await;
    assert_eq!(subscriber_ids(&page), names(1..=5));
    let cursor = page["next"].as_str().unwrap();
    let (_, page) = app
        .get(&format!(
            "/v2/subscribers?limit=5&orderBy=createdAt&orderDirection=ASC&after={cursor}"
        ))
        .await;
    assert_eq!(subscriber_ids(&page), names(6..=10));
    assert_eq!(page["previous"].as_str().unwrap(), first_id(&page));
    let (_, page) = app
        .get("/v2/subscribers?limit=100&orderBy=updatedAt&orderDirection=desc")
        .await;
    assert_eq!(subscriber_ids(&page), names((1..=25).rev()));
    assert_eq!(page["next"], Value::Null);

    // The default limit is 10.
    let (_, page) = app.get("/v2/subscribers").await;
    assert_eq!(page["data"].as_array().unwrap().len(), 10);

    // An unknown cursor gives an empty page.
    for cursor in ["ffffffffffffffffffffffff", "not-an-id"] {
        let (status, page) = app.get(&format!("/v2/subscribers?after={cursor}")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(page["data"], serde_json::json!([]));
        assert_eq!(page["next"], Value::Null);
        assert_eq!(page["previous"], Value::Null);
        assert_eq!(page["totalCount"], 0);
    }
}
db_test!(walk, pages_walk_forwards_and_backwards);

async fn bad_page_parameters(app: TestApp) {
    let (status, body) = app.get("/v2/subscribers?after=a&before=b").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_error(&body, 400);
    assert_eq!(
        body["message"],
        "Cannot specify both \"before\" and \"after\" cursors at the same time."
    );
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=-3", "limit"),
        ("orderBy=email", "orderBy"),
        ("orderDirection=sideways", "orderDirection"),
    ] {
        let (status, body) = app.get(&format!("/v2/subscribers?{query}")).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{query}");
        assert!(
            body["errors"][field]["messages"][0].is_string(),
            "{query}: {body}"
        );
    }
    let (status, page) = app.get("/v2/subscribers?limit=100").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(page["totalCount"], 0);
}
db_test!(bad_parameters, bad_page_parameters);

async fn total_count_is_capped(app: TestApp) {
    // Seeded in one statement.
    assert_eq!(
        app.store
            .seed_subscribers(&app.tenant, "big", 50_010)
            .await
            .unwrap(),
        50_010
    );
    let (status, page) = app.get("/v2/subscribers?limit=2").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(page["totalCount"], 50_000);
    assert_eq!(page["totalCountCapped"], true);
    assert_eq!(subscriber_ids(&page), ["big50010", "big50009"]);
    // A filter below the cap counts exactly.
    let (_, page) = app.get("/v2/subscribers?email=user4999").await;
    assert_eq!(page["totalCount"], 11, "user4999 and user49990..user49999");
    assert_eq!(page["totalCountCapped"], false);
    let (_, page) = app.get("/v2/subscribers?subscriberId=big42").await;
    assert_eq!(subscriber_ids(&page), ["big42"]);
    assert_eq!(page["data"][0]["email"], "user42@big.example.com");
}
db_test!(capped_count, total_count_is_capped);
