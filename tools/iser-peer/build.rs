//! Generates the rdma-core bindings (libibverbs, librdmacm) from the
//! system headers and builds the C shim for the static inline verbs.
use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=src/shim.c");
    println!("cargo:rerun-if-changed=src/shim.h");
    cc::Build::new()
        .file("src/shim.c")
        .warnings(true)
        .compile("peershim");
    println!("cargo:rustc-link-lib=ibverbs");
    println!("cargo:rustc-link-lib=rdmacm");
    let b = bindgen::Builder::default()
        .header("src/shim.h")
        .allowlist_function("peer_.*")
        .allowlist_function("ibv_(alloc_pd|dealloc_pd|reg_mr|dereg_mr|create_cq|destroy_cq|create_comp_channel|destroy_comp_channel|get_cq_event|ack_cq_events|wc_status_str)")
        .allowlist_function("rdma_(create_event_channel|destroy_event_channel|create_id|destroy_id|bind_addr|listen|get_cm_event|ack_cm_event|accept|reject|disconnect|create_qp|destroy_qp|event_str|get_local_addr|get_peer_addr)")
        .allowlist_type("ibv_wc_opcode|ibv_wc_status|ibv_wr_opcode|ibv_send_flags|ibv_access_flags|ibv_wc_flags|ibv_recv_wr|rdma_cm_event_type|rdma_port_space|ibv_qp_type")
        .allowlist_var("IBV_.*|RDMA_.*")
        .rustified_enum("ibv_wc_status|ibv_wc_opcode|rdma_cm_event_type")
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false)
        .generate()
        .expect("bindgen on <infiniband/verbs.h> and <rdma/rdma_cma.h> (libibverbs-dev, librdmacm-dev)");
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR for build scripts"));
    b.write_to_file(out.join("rdma.rs"))
        .expect("write the generated bindings into OUT_DIR");
}
