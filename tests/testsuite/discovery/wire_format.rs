//! The instance JSON, byte for byte as Curator 5.4's `JsonInstanceSerializer` writes it (the
//! expected texts were written by Curator itself), and read back as Curator reads it.

use serde::{Deserialize, Serialize};
use serde_json::json;
use zk_curator::discovery::{InstanceSerializer, JsonInstanceSerializer, ServiceInstance, ServiceType, UriSpec};

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
struct Details {
    region: String,
    weight: i32,
}

fn api_instance() -> ServiceInstance<Details> {
    ServiceInstance::builder("api")
        .id("id-1")
        .address("10.0.0.1")
        .port(8080)
        .ssl_port(8443)
        .registration_time_utc(1_700_000_000_000)
        .uri_spec(UriSpec::parse("{scheme}://{address}:{port}/x").unwrap())
        .payload(Details { region: "eu".into(), weight: 3 })
        .build()
        .unwrap()
}

/// Written by Curator 5.4 for the same instance (payload class `Probe$Details`), compatible mode.
const CURATOR_COMPATIBLE: &str = r#"{"name":"api","id":"id-1","address":"10.0.0.1","port":8080,"sslPort":8443,"payload":{"@class":"Probe$Details","region":"eu","weight":3},"registrationTimeUTC":1700000000000,"serviceType":"DYNAMIC","uriSpec":{"parts":[{"value":"scheme","variable":true},{"value":"://","variable":false},{"value":"address","variable":true},{"value":":","variable":false},{"value":"port","variable":true},{"value":"/x","variable":false}]}}"#;

#[test]
fn our_json_is_curators_byte_for_byte_in_both_modes() {
    let serializer = JsonInstanceSerializer::new().payload_class("Probe$Details");
    let bytes = serializer.serialize(&api_instance()).unwrap();
    assert_eq!(String::from_utf8(bytes).unwrap(), CURATOR_COMPATIBLE);

    let full = serializer.clone().compatible(false).serialize(&api_instance()).unwrap();
    let expected = format!("{},\"enabled\":true}}", &CURATOR_COMPATIBLE[..CURATOR_COMPATIBLE.len() - 1]);
    assert_eq!(String::from_utf8(full).unwrap(), expected);

    // Nulls are written, a string payload is bare, a disabled instance says so outside compatible mode.
    let bare =
        ServiceInstance::builder("api").id("id-2").no_address().registration_time_utc(1).payload("text".to_string());
    let bytes = JsonInstanceSerializer::new().compatible(false).serialize(&bare.build().unwrap()).unwrap();
    assert_eq!(
        String::from_utf8(bytes).unwrap(),
        r#"{"name":"api","id":"id-2","address":null,"port":null,"sslPort":null,"payload":"text","registrationTimeUTC":1,"serviceType":"DYNAMIC","uriSpec":null,"enabled":true}"#
    );
    let map = ServiceInstance::builder("api")
        .id("id-3")
        .address("h")
        .registration_time_utc(1)
        .service_type(ServiceType::DynamicSequential)
        .enabled(false)
        .payload(json!({"k": 1}));
    let bytes = JsonInstanceSerializer::new()
        .payload_class("java.util.HashMap")
        .compatible(false)
        .serialize(&map.build().unwrap())
        .unwrap();
    assert_eq!(
        String::from_utf8(bytes).unwrap(),
        r#"{"name":"api","id":"id-3","address":"h","port":null,"sslPort":null,"payload":{"@class":"java.util.HashMap","k":1},"registrationTimeUTC":1,"serviceType":"DYNAMIC_SEQUENTIAL","uriSpec":null,"enabled":false}"#
    );
    // An array payload as Jackson's wrapper array.
    let list = ServiceInstance::builder("api").id("id-4").address("h").registration_time_utc(1).payload(vec![1, 2]);
    let bytes = JsonInstanceSerializer::new().serialize(&list.build().unwrap()).unwrap();
    assert_eq!(
        String::from_utf8(bytes).unwrap(),
        r#"{"name":"api","id":"id-4","address":"h","port":null,"sslPort":null,"payload":["java.util.ArrayList",[1,2]],"registrationTimeUTC":1,"serviceType":"DYNAMIC","uriSpec":null}"#
    );
}

#[test]
fn curators_json_reads_back_with_its_payload_and_defaults() {
    let serializer = JsonInstanceSerializer::new();
    let read: ServiceInstance<Details> = serializer.deserialize(CURATOR_COMPATIBLE.as_bytes()).unwrap();
    assert_eq!(read, api_instance());
    assert!(read.is_enabled(), "a missing `enabled` reads as true, as Curator's");
    assert_eq!(read.build_uri(), "https://10.0.0.1:8080/x");

    // Unknown fields ignored, missing ones defaulted, a payload without type info taken as is.
    let loose = r#"{"name":"api","id":"x","payload":{"region":"us","weight":1},"serviceType":"STATIC","extra":1}"#;
    let read: ServiceInstance<Details> = serializer.deserialize(loose.as_bytes()).unwrap();
    assert_eq!(read.service_type(), ServiceType::Static);
    assert_eq!(read.registration_time_utc(), 0);
    assert_eq!(read.payload(), Some(&Details { region: "us".into(), weight: 1 }));
    let read: ServiceInstance<Vec<i32>> =
        serializer.deserialize(br#"{"name":"a","id":"b","payload":["java.util.ArrayList",[1,2]]}"#).unwrap();
    assert_eq!(read.payload(), Some(&vec![1, 2]));
    let read: ServiceInstance =
        serializer.deserialize(br#"{"name":"a","id":"b","enabled":false,"payload":null}"#).unwrap();
    assert!(!read.is_enabled());
    assert_eq!(read.payload(), None);

    // Not an instance, or a payload of another shape: an error, never a panic.
    for bad in [
        &b"not json"[..],
        br#"{"name":"a","serviceType":"ELASTIC"}"#,
        br#"{"name":"a","payload":{"region":5}}"#,
        br#"[1]"#,
    ] {
        let read: Result<ServiceInstance<Details>, _> = serializer.deserialize(bad);
        assert!(read.is_err(), "{:?} read as an instance", String::from_utf8_lossy(bad));
    }
}

#[test]
fn uri_specs_build_as_curators() {
    let spec =
        UriSpec::parse("{scheme}://{address}:{port}/{ssl-port}/{name}/{id}/{service-type}/{custom}/{[}x{]}").unwrap();
    assert_eq!(spec.to_string(), "{scheme}://{address}:{port}/{ssl-port}/{name}/{id}/{service-type}/{custom}/{[}x{]}");
    let plain =
        ServiceInstance::<()>::builder("api").id("i").address("h").port(1).uri_spec(spec.clone()).build().unwrap();
    assert_eq!(plain.build_uri(), "http://h:1//api/i/dynamic//{x}");
    let vars = [("custom", "c"), ("port", "9")].into_iter().collect();
    assert_eq!(plain.build_uri_with(&vars), "http://h:9//api/i/dynamic/c/{x}");
    let ssl = plain.to_builder().ssl_port(2).build().unwrap();
    assert_eq!(ssl.build_uri(), "https://h:1/2/api/i/dynamic//{x}");
    for bad in ["{a{b}}", "a}", "{open"] {
        assert!(UriSpec::parse(bad).is_err(), "{bad} parsed");
    }
}

#[test]
fn names_and_ids_with_a_slash_or_empty_are_typed_errors() {
    for (name, id) in [("a/b", "x"), ("", "x"), ("api", "x/y"), ("api", "")] {
        let built = ServiceInstance::<()>::builder(name).id(id).build();
        match built {
            Err(zk_curator::Error::InvalidArgument { value, .. }) => assert!(value == name || value == id),
            other => panic!("{name}/{id}: {other:?}"),
        }
    }
}
