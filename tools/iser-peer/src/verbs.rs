//! The only `unsafe` of the peer: thin owners of librdmacm / libibverbs
//! objects and of the memory the RNIC reads and writes.
//!
//! Everything above this module is safe Rust. Objects free themselves in
//! `Drop` in the order the verbs require (QP before CQ before channel,
//! MRs before their memory, PD last, the cm_id after its QP).

use crate::sys;
use std::ffi::CStr;
use std::io;
use std::net::SocketAddr;
use std::os::raw::c_void;
use std::ptr;
use std::rc::Rc;

fn last_err(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

fn set_nonblock(fd: i32) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor we own; no memory is passed.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if fl < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) } < 0 {
        return Err(last_err("fcntl O_NONBLOCK"));
    }
    Ok(())
}

/// Memory shared with the RNIC: page-aligned, zeroed, fixed address for its
/// whole life. Accessed from software only by copies, never by references,
/// because the hardware may write it at any time.
pub struct DmaBuf {
    ptr: *mut u8,
    len: usize,
}

impl DmaBuf {
    pub fn new(len: usize) -> io::Result<Rc<DmaBuf>> {
        let len = len.max(1);
        let mut p: *mut c_void = ptr::null_mut();
        // SAFETY: posix_memalign writes the pointer to `p` only.
        let rc = unsafe { libc::posix_memalign(&mut p, 4096, len) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        // SAFETY: `p` is a fresh allocation of `len` bytes.
        unsafe { ptr::write_bytes(p as *mut u8, 0, len) };
        Ok(Rc::new(DmaBuf {
            ptr: p as *mut u8,
            len,
        }))
    }

    pub fn len(&self) -> usize {
        self.len
    }

    fn check(&self, off: usize, n: usize) -> bool {
        off.checked_add(n).is_some_and(|e| e <= self.len)
    }

    /// Copies `data` to `off`; false (nothing copied) if out of bounds.
    pub fn write(&self, off: usize, data: &[u8]) -> bool {
        if !self.check(off, data.len()) {
            return false;
        }
        // SAFETY: bounds checked above; `data` cannot overlap the buffer
        // because no reference into the buffer is ever handed out.
        unsafe { ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(off), data.len()) };
        true
    }

    /// Copies `out.len()` bytes from `off`; false if out of bounds.
    pub fn read(&self, off: usize, out: &mut [u8]) -> bool {
        if !self.check(off, out.len()) {
            return false;
        }
        // SAFETY: bounds checked above; distinct memory as in `write`.
        unsafe { ptr::copy_nonoverlapping(self.ptr.add(off), out.as_mut_ptr(), out.len()) };
        true
    }

    pub fn to_vec(&self, off: usize, n: usize) -> Option<Vec<u8>> {
        let mut v = vec![0; n];
        self.read(off, &mut v).then_some(v)
    }

    fn addr(&self, off: usize) -> u64 {
        self.ptr as u64 + off as u64
    }
}

impl Drop for DmaBuf {
    fn drop(&mut self) {
        // SAFETY: allocated by posix_memalign; every MR over it holds an
        // Rc and is deregistered first.
        unsafe { libc::free(self.ptr as *mut c_void) };
    }
}

/// A memory region registered with a protection domain.
pub struct Mr {
    mr: *mut sys::ibv_mr,
    pub buf: Rc<DmaBuf>,
    _pd: Rc<Pd>,
}

impl Mr {
    pub fn lkey(&self) -> u32 {
        // SAFETY: `mr` is a live registration owned by self.
        unsafe { (*self.mr).lkey }
    }
    fn sge(&self, off: usize, len: usize) -> Option<sys::ibv_sge> {
        if !self.buf.check(off, len) {
            return None;
        }
        Some(sys::ibv_sge {
            addr: self.buf.addr(off),
            length: len as u32,
            lkey: self.lkey(),
        })
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: registered by ibv_reg_mr and not yet deregistered.
        unsafe { sys::ibv_dereg_mr(self.mr) };
    }
}

pub struct Pd(*mut sys::ibv_pd);

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: allocated by ibv_alloc_pd; all MRs (which hold an Rc) and
        // the QP are gone by now.
        unsafe { sys::ibv_dealloc_pd(self.0) };
    }
}

/// rdma_cm event channel (non-blocking).
pub struct EventChannel(*mut sys::rdma_event_channel);

/// Opaque identity of a cm_id (its address), to match events to connections.
pub type IdKey = usize;

/// A copied-out rdma_cm event.
pub struct CmEvent {
    pub kind: sys::rdma_cm_event_type,
    pub id: IdKey,
    pub status: i32,
    pub private_data: Option<Vec<u8>>,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    /// For CONNECT_REQUEST: the new cm_id, owned by the receiver.
    pub new_id: Option<CmId>,
}

impl CmEvent {
    pub fn name(&self) -> String {
        // SAFETY: rdma_event_str returns a static string for any value.
        unsafe { CStr::from_ptr(sys::rdma_event_str(self.kind)) }
            .to_string_lossy()
            .into_owned()
    }
}

impl EventChannel {
    pub fn new() -> io::Result<EventChannel> {
        // SAFETY: plain constructor.
        let ch = unsafe { sys::rdma_create_event_channel() };
        if ch.is_null() {
            return Err(last_err("rdma_create_event_channel"));
        }
        // SAFETY: `ch` is valid; fd is its first field.
        set_nonblock(unsafe { (*ch).fd })?;
        Ok(EventChannel(ch))
    }

    pub fn fd(&self) -> i32 {
        // SAFETY: valid channel.
        unsafe { (*self.0).fd }
    }

    /// Next event, if one is ready.
    pub fn get(&self) -> Option<CmEvent> {
        let mut ev: *mut sys::rdma_cm_event = ptr::null_mut();
        // SAFETY: valid channel; on success `ev` points to an event we ack below.
        if unsafe { sys::rdma_get_cm_event(self.0, &mut ev) } != 0 {
            return None;
        }
        // SAFETY: `ev` is valid until rdma_ack_cm_event.
        let e = unsafe { &*ev };
        let kind = e.event;
        let is_req = kind == sys::rdma_cm_event_type::RDMA_CM_EVENT_CONNECT_REQUEST;
        // SAFETY: the `conn` member is the one used for connected port spaces.
        let conn = unsafe { e.param.conn };
        let private_data = if !conn.private_data.is_null() && conn.private_data_len > 0 {
            // SAFETY: the CM gives `private_data_len` readable bytes.
            Some(
                unsafe {
                    std::slice::from_raw_parts(
                        conn.private_data as *const u8,
                        conn.private_data_len as usize,
                    )
                }
                .to_vec(),
            )
        } else {
            None
        };
        let out = CmEvent {
            kind,
            id: e.id as IdKey,
            status: e.status,
            private_data,
            responder_resources: conn.responder_resources,
            initiator_depth: conn.initiator_depth,
            new_id: if is_req { Some(CmId(e.id)) } else { None },
        };
        // SAFETY: acking the event we got; the new cm_id stays ours.
        unsafe { sys::rdma_ack_cm_event(ev) };
        Some(out)
    }
}

impl Drop for EventChannel {
    fn drop(&mut self) {
        // SAFETY: all ids on it are destroyed before (they borrow nothing,
        // but the owner drops connections and the listener first).
        unsafe { sys::rdma_destroy_event_channel(self.0) };
    }
}

/// An rdma_cm identifier (listener or connection).
pub struct CmId(*mut sys::rdma_cm_id);

impl CmId {
    pub fn key(&self) -> IdKey {
        self.0 as IdKey
    }

    /// Binds and listens on `addr`.
    pub fn listen(ch: &EventChannel, addr: SocketAddr, backlog: i32) -> io::Result<CmId> {
        let mut id: *mut sys::rdma_cm_id = ptr::null_mut();
        // SAFETY: valid channel; `id` is written on success.
        let rc = unsafe {
            sys::rdma_create_id(
                ch.0,
                &mut id,
                ptr::null_mut(),
                sys::rdma_port_space_RDMA_PS_TCP,
            )
        };
        if rc != 0 {
            return Err(last_err("rdma_create_id"));
        }
        let id = CmId(id);
        let mut ss: libc::sockaddr_storage =
            // SAFETY: all-zero is a valid sockaddr_storage.
            unsafe { std::mem::zeroed() };
        match addr {
            SocketAddr::V4(a) => {
                // SAFETY: sockaddr_in fits in sockaddr_storage.
                let sin = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in) };
                sin.sin_family = libc::AF_INET as u16;
                sin.sin_port = a.port().to_be();
                sin.sin_addr.s_addr = u32::from(*a.ip()).to_be();
            }
            SocketAddr::V6(a) => {
                // SAFETY: sockaddr_in6 fits in sockaddr_storage.
                let sin6 = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in6) };
                sin6.sin6_family = libc::AF_INET6 as u16;
                sin6.sin6_port = a.port().to_be();
                sin6.sin6_addr.s6_addr = a.ip().octets();
            }
        }
        // SAFETY: valid id; the sockaddr is fully initialised.
        if unsafe { sys::rdma_bind_addr(id.0, &mut ss as *mut _ as *mut sys::sockaddr) } != 0 {
            return Err(last_err("rdma_bind_addr"));
        }
        // SAFETY: bound id.
        if unsafe { sys::rdma_listen(id.0, backlog) } != 0 {
            return Err(last_err("rdma_listen"));
        }
        Ok(id)
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        // SAFETY: the QP (if any) was destroyed by Endpoint::drop first.
        unsafe { sys::rdma_destroy_id(self.0) };
    }
}

/// Completion of a work request, copied out.
#[derive(Clone, Copy, Debug)]
pub struct Wc {
    pub wr_id: u64,
    pub ok: bool,
    pub status: sys::ibv_wc_status,
    pub byte_len: u32,
}

impl Wc {
    pub fn status_str(&self) -> String {
        // SAFETY: static string for any status.
        unsafe { CStr::from_ptr(sys::ibv_wc_status_str(self.status)) }
            .to_string_lossy()
            .into_owned()
    }
}

/// One connection's verbs resources: PD, completion channel, CQ, QP.
pub struct Endpoint {
    // Field order is drop order: QP (in `Drop`), then CQ, channel, PD, id.
    cq: *mut sys::ibv_cq,
    comp: *mut sys::ibv_comp_channel,
    pub pd: Rc<Pd>,
    id: CmId,
    unacked: u32,
    qp: bool,
}

/// Where a local scatter entry lives.
pub struct Local<'a> {
    pub mr: &'a Mr,
    pub off: usize,
    pub len: usize,
}

impl Endpoint {
    /// Creates PD, CQ and QP for a connect-request id.
    pub fn new(id: CmId, send_wr: u32, recv_wr: u32) -> io::Result<Endpoint> {
        // SAFETY: a connect-request id has its device context set.
        let verbs = unsafe { (*id.0).verbs };
        // SAFETY: valid context.
        let pd = unsafe { sys::ibv_alloc_pd(verbs) };
        if pd.is_null() {
            return Err(last_err("ibv_alloc_pd"));
        }
        let pd = Rc::new(Pd(pd));
        // SAFETY: valid context.
        let comp = unsafe { sys::ibv_create_comp_channel(verbs) };
        if comp.is_null() {
            return Err(last_err("ibv_create_comp_channel"));
        }
        // SAFETY: `comp` valid.
        set_nonblock(unsafe { (*comp).fd })?;
        let cqe = (send_wr + recv_wr + 16) as i32;
        // SAFETY: valid context and channel.
        let cq = unsafe { sys::ibv_create_cq(verbs, cqe, ptr::null_mut(), comp, 0) };
        if cq.is_null() {
            // SAFETY: created above, unused.
            unsafe { sys::ibv_destroy_comp_channel(comp) };
            return Err(last_err("ibv_create_cq"));
        }
        let mut ep = Endpoint {
            cq,
            comp,
            pd,
            id,
            unacked: 0,
            qp: false,
        };
        let mut attr = sys::ibv_qp_init_attr {
            send_cq: cq,
            recv_cq: cq,
            qp_type: sys::ibv_qp_type_IBV_QPT_RC,
            sq_sig_all: 0,
            ..Default::default()
        };
        attr.cap.max_send_wr = send_wr;
        attr.cap.max_recv_wr = recv_wr;
        attr.cap.max_send_sge = 1;
        attr.cap.max_recv_sge = 1;
        // SAFETY: valid id, PD and CQ.
        if unsafe { sys::rdma_create_qp(ep.id.0, ep.pd.0, &mut attr) } != 0 {
            return Err(last_err("rdma_create_qp"));
        }
        ep.qp = true;
        ep.arm();
        Ok(ep)
    }

    pub fn key(&self) -> IdKey {
        self.id.key()
    }

    pub fn comp_fd(&self) -> i32 {
        // SAFETY: valid channel.
        unsafe { (*self.comp).fd }
    }

    fn arm(&self) {
        // SAFETY: valid CQ.
        unsafe { sys::peer_req_notify_cq(self.cq, 0) };
    }

    /// Registers `buf` (local write, remote read/write: an iWARP RDMA Read
    /// sink must allow remote write).
    pub fn register(&self, buf: &Rc<DmaBuf>) -> io::Result<Mr> {
        let access = sys::ibv_access_flags_IBV_ACCESS_LOCAL_WRITE
            | sys::ibv_access_flags_IBV_ACCESS_REMOTE_WRITE
            | sys::ibv_access_flags_IBV_ACCESS_REMOTE_READ;
        // SAFETY: the memory stays allocated while the Mr (holding an Rc) lives.
        let mr =
            unsafe { sys::ibv_reg_mr(self.pd.0, buf.ptr as *mut c_void, buf.len, access as i32) };
        if mr.is_null() {
            return Err(last_err("ibv_reg_mr"));
        }
        Ok(Mr {
            mr,
            buf: buf.clone(),
            _pd: self.pd.clone(),
        })
    }

    /// Accepts with `private_data` (None: none at all).
    pub fn accept(
        &self,
        private_data: Option<&[u8]>,
        responder_resources: u8,
        initiator_depth: u8,
        rnr_retry: u8,
    ) -> io::Result<()> {
        let mut p = sys::rdma_conn_param {
            responder_resources,
            initiator_depth,
            retry_count: 7,
            rnr_retry_count: rnr_retry,
            ..Default::default()
        };
        if let Some(pd) = private_data {
            p.private_data = pd.as_ptr() as *const c_void;
            p.private_data_len = pd.len() as u8;
        }
        // SAFETY: valid id with a QP; private data outlives the call.
        if unsafe { sys::rdma_accept(self.id.0, &mut p) } != 0 {
            return Err(last_err("rdma_accept"));
        }
        Ok(())
    }

    pub fn disconnect(&self) {
        // SAFETY: valid id.
        unsafe { sys::rdma_disconnect(self.id.0) };
    }

    pub fn post_recv(&self, wr_id: u64, l: Local<'_>) -> io::Result<()> {
        let mut sge = l.mr.sge(l.off, l.len).ok_or(io::ErrorKind::InvalidInput)?;
        let mut wr = sys::ibv_recv_wr {
            wr_id,
            next: ptr::null_mut(),
            sg_list: &mut sge,
            num_sge: 1,
        };
        let mut bad: *mut sys::ibv_recv_wr = ptr::null_mut();
        // SAFETY: valid QP; `wr`/`sge` live for the call (the provider copies them).
        let rc = unsafe { sys::peer_post_recv((*self.id.0).qp, &mut wr, &mut bad) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(())
    }

    /// Posts one send-queue work request. `local` None: zero-length.
    #[allow(clippy::too_many_arguments)]
    fn post(
        &self,
        wr_id: u64,
        opcode: sys::ibv_wr_opcode,
        local: Option<Local<'_>>,
        remote: Option<(u64, u32)>,
        invalidate: Option<u32>,
        signaled: bool,
        solicited: bool,
    ) -> io::Result<()> {
        let mut sge = match &local {
            Some(l) => l.mr.sge(l.off, l.len).ok_or(io::ErrorKind::InvalidInput)?,
            None => sys::ibv_sge::default(),
        };
        // SAFETY: all-zero is a valid ibv_send_wr (null pointers, zero counts).
        let mut wr: sys::ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = wr_id;
        wr.opcode = opcode;
        if local.is_some() {
            wr.sg_list = &mut sge;
            wr.num_sge = 1;
        }
        let mut flags = 0;
        if signaled {
            flags |= sys::ibv_send_flags_IBV_SEND_SIGNALED;
        }
        if solicited {
            flags |= sys::ibv_send_flags_IBV_SEND_SOLICITED;
        }
        wr.send_flags = flags;
        if let Some((addr, rkey)) = remote {
            wr.wr.rdma = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 {
                remote_addr: addr,
                rkey,
            };
        }
        if let Some(k) = invalidate {
            wr.__bindgen_anon_1.invalidate_rkey = k;
            // libsiw (rdma-core's siw provider) takes the STag of a Send
            // with Invalidate from `wr.rdma.rkey`, not `invalidate_rkey`:
            // set both. Other providers ignore `wr.rdma` for a Send.
            if remote.is_none() {
                wr.wr.rdma = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 {
                    remote_addr: 0,
                    rkey: k,
                };
            }
        }
        let mut bad: *mut sys::ibv_send_wr = ptr::null_mut();
        // SAFETY: valid QP; `wr`/`sge` live for the call.
        let rc = unsafe { sys::peer_post_send((*self.id.0).qp, &mut wr, &mut bad) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(())
    }

    /// Send (SendSE) or Send with Invalidate (SendInvSE).
    pub fn send(&self, wr_id: u64, l: Local<'_>, invalidate: Option<u32>) -> io::Result<()> {
        let op = if invalidate.is_some() {
            sys::ibv_wr_opcode_IBV_WR_SEND_WITH_INV
        } else {
            sys::ibv_wr_opcode_IBV_WR_SEND
        };
        self.post(wr_id, op, Some(l), None, invalidate, true, true)
    }

    pub fn rdma_write(
        &self,
        wr_id: u64,
        l: Local<'_>,
        addr: u64,
        rkey: u32,
        signaled: bool,
    ) -> io::Result<()> {
        self.post(
            wr_id,
            sys::ibv_wr_opcode_IBV_WR_RDMA_WRITE,
            Some(l),
            Some((addr, rkey)),
            None,
            signaled,
            false,
        )
    }

    /// RDMA Read; `l` None is the zero-length Read.
    pub fn rdma_read(
        &self,
        wr_id: u64,
        l: Option<Local<'_>>,
        addr: u64,
        rkey: u32,
    ) -> io::Result<()> {
        self.post(
            wr_id,
            sys::ibv_wr_opcode_IBV_WR_RDMA_READ,
            l,
            Some((addr, rkey)),
            None,
            true,
            false,
        )
    }

    /// Drains the completion channel and the CQ (re-arming it) into `out`.
    pub fn poll(&mut self, out: &mut Vec<Wc>) {
        let mut cq: *mut sys::ibv_cq = ptr::null_mut();
        let mut ctx: *mut c_void = ptr::null_mut();
        // SAFETY: non-blocking channel; returns -1 when no event is pending.
        while unsafe { sys::ibv_get_cq_event(self.comp, &mut cq, &mut ctx) } == 0 {
            self.unacked += 1;
        }
        if self.unacked >= 64 {
            // SAFETY: acking events we got.
            unsafe { sys::ibv_ack_cq_events(self.cq, self.unacked) };
            self.unacked = 0;
        }
        self.arm();
        // SAFETY: all-zero ibv_wc is valid (status 0 = SUCCESS).
        let mut wcs: [sys::ibv_wc; 32] = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: valid CQ; the array holds 32 entries.
            let n = unsafe { sys::peer_poll_cq(self.cq, 32, wcs.as_mut_ptr()) };
            if n <= 0 {
                break;
            }
            for w in &wcs[..n as usize] {
                out.push(Wc {
                    wr_id: w.wr_id,
                    ok: w.status == sys::ibv_wc_status::IBV_WC_SUCCESS,
                    status: w.status,
                    byte_len: w.byte_len,
                });
            }
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        // SAFETY: destroy in verbs order; each object is live and ours.
        unsafe {
            if self.qp {
                sys::rdma_destroy_qp(self.id.0);
            }
            if self.unacked > 0 {
                sys::ibv_ack_cq_events(self.cq, self.unacked);
            }
            sys::ibv_destroy_cq(self.cq);
            sys::ibv_destroy_comp_channel(self.comp);
        }
        // The PD (Rc) and id drop after this; MRs of this connection are
        // owned by the connection and dropped before the Endpoint.
    }
}
