//! Slow reads do not stall the server: capped counts and searches over tens of thousands of rows run beside
//! the readiness check, which keeps answering (on SQLite such reads run off the runtime's workers, see
//! `store::sqlite`). Its latency meanwhile is printed, not judged: on a machine shared with other tests it
//! measures the machine.

use std::time::{Duration, Instant};

use reqwest::StatusCode;

use crate::db_test;
use crate::support::TestApp;

/// More subscribers than a page: listing them counts up to the 50,001 cap.
const SUBSCRIBERS: i64 = 60_000;

/// Slow reads, with the `totalCount` each answers: a page of the list, which counts up to the 50,001 cap,
/// and a search whose two characters have no trigram and match nothing, which reads every subscriber.
const SLOW: [(&str, i64); 2] = [
    ("/v2/subscribers?limit=1", 50_000),
    ("/v2/subscribers?limit=1&email=QZ", 0),
];

async fn slow_reads_do_not_delay_the_health_check(app: TestApp) {
    app.store
        .seed_subscribers(&app.tenant, "reads-", SUBSCRIBERS)
        .await
        .unwrap();
    app.store.checkpoint().await.unwrap();

    // How long each slow read takes here, and the health check alone.
    let mut slow_reads = Vec::new();
    for (path, total) in SLOW {
        let started = Instant::now();
        let (status, page) = app.get(path).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        assert_eq!(page["totalCount"], total, "{path}: {page}");
        slow_reads.push(started.elapsed());
    }
    let alone = health_latencies(&app, 20).await;

    // Twice as many slow readers as the runtime (shared by the server and this client) has workers, each
    // reading again and again until the checks below are done.
    let stop = tokio_util::sync::CancellationToken::new();
    let readers: Vec<_> = (0..4)
        .map(|i| {
            let (client, url, key) = (app.client.clone(), app.url(SLOW[i % 2].0), app.key.clone());
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut pages = 0;
                while pages == 0 || !stop.is_cancelled() {
                    let resp = client
                        .get(&url)
                        .header("Authorization", format!("ApiKey {key}"))
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(resp.status(), StatusCode::OK);
                    pages += 1;
                }
                pages
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let busy = health_latencies(&app, 100).await;
    stop.cancel();
    let mut pages = 0;
    for r in readers {
        pages += r.await.unwrap();
    }

    let at = |l: &[Duration], percent: usize| l[l.len() * percent / 100 - 1];
    eprintln!(
        "{:?}: slow reads {slow_reads:?}, {pages} pages while measuring; health alone p50 {:?} p95 {:?}, \
         beside them p50 {:?} p95 {:?} p99 {:?}",
        app.backend,
        at(&alone, 50),
        at(&alone, 95),
        at(&busy, 50),
        at(&busy, 95),
        at(&busy, 99),
    );
    assert!(pages >= 4, "the slow reads ran meanwhile");
}
db_test!(
    slow_reads_beside_health,
    slow_reads_do_not_delay_the_health_check
);

/// Latencies of `n` readiness checks (which read the database), 5 ms apart, sorted.
async fn health_latencies(app: &TestApp, n: usize) -> Vec<Duration> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        let resp = app
            .client
            .get(app.url("/v1/health-check/ready"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        out.push(started.elapsed());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    out.sort();
    out
}
