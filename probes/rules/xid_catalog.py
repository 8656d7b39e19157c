"""NVIDIA Xid codes: what each means, how bad it is and what to do, for the kernel-log rules.

Source: NVIDIA, "Analyzing Xid Errors with the Xid Catalog"
(https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, the Ampere-and-newer
catalog: mnemonic, description, "Applies to A100/H100/B100/GB200", the two Resolution Buckets
and the trigger conditions), its "Fault Resolution Buckets" sheet (what each bucket asks of the
operator) and its "XID 144-150 Decode" sheet; codes that the catalog marks unused on Ampere and
newer carry their meaning from NVIDIA's older "Xid Errors" page for Volta and earlier
(https://docs.nvidia.com/deploy/xid-errors/archive/index.html).  The wording here is ours.

``severity`` is rigwatch's triage judgement, not NVIDIA's: ``critical`` where the GPU needs a
reset or the node a reboot before it can be trusted again (the catalog's RESET_GPU and
RESTART_BM buckets, uncorrectable memory errors, NVLink and GSP failures), ``warning`` where a
job died or something needs looking at but the GPU itself stays usable (the RESTART_APP bucket,
application faults), ``info`` where nothing needs doing.  Some codes are decoded further per
line by the kernel rules (NVLink5 "Fatal"/"Nonfatal", Xid 154's recovery action).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from probes.triage import Severity

Category = Literal["application", "driver", "memory", "nvlink", "thermal-power", "bus", "gsp",
                   "other"]

CRIT = Severity.CRITICAL
WARN = Severity.WARNING
INFO = Severity.INFO


@dataclass(frozen=True)
class XidInfo:
    """One Xid code: its name, where the fault lives, how urgent, and the two actions.

    ``action`` is what to do now to get the GPU back into service (the catalog's immediate
    Resolution Bucket); ``investigate`` is what to do if it comes back (the investigatory one).
    Both end with the catalog's bucket name in brackets so the operator can look it up.
    """

    code: int
    name: str
    category: Category
    severity: Severity
    meaning: str
    action: str
    investigate: str


BUCKETS: Mapping[str, str] = {
    "RESTART_APP": "Restart the application; the GPU needs no reset",
    "RESET_GPU": "Drain the GPU and reset it (nvidia-smi -r); a node reboot is not needed",
    "RESTART_BM": "Reboot the node (bare metal)",
    "RESTART_VM": "Restart the VM that owns the GPU",
    "IGNORE": "No action needed",
    "CONTACT_SUPPORT": "Contact your support organisation or hardware vendor",
    "CHECK_APP/CUDA": "Check the application: it likely passed bad data or used wrong methods "
                      "(the PID in the message names it); report a driver bug if it is not",
    "CHECK_MECHANICALS": "Check that the board is seated and every power connector is secure",
    "UPDATE_SWFW": "Update the driver and firmware (guest and host driver versions must match)",
    "WORKFLOW_XID_13": "Same GPC/TPC repeating: run DCGM diagnostics, then field diagnostics; "
                       "alone or varying: debug the application (compute-sanitizer memcheck, "
                       "cuda-gdb, CUDA_DEVICE_WAITS_ON_EXCEPTION=1)",
    "WORKFLOW_XID_31": "Repeated MMU faults on the same GPU: run DCGM diagnostics, then field "
                       "diagnostics; on different GPUs or alone: debug the application "
                       "(compute-sanitizer memcheck, cuda-gdb)",
    "WORKFLOW_XID_45": "Alone: restart Fabric Manager; with other Xids: follow those, this one "
                       "is only the cleanup",
    "WORKFLOW_XID_48": "Drain and reset the GPU; alone, run field diagnostics; for SRAM errors "
                       "check the SRAM threshold flag and RMA if it is exceeded",
    "WORKFLOW_NVLINK_ERR": "Reset the GPU or reboot the node to clear it; decode the register "
                           "fields in the message and check nvidia-smi nvlink -e; a repeat "
                           "after reset means hardware (link, cable or the peer GPU)",
    "WORKFLOW_NVLINK5_ERR": "Decode IntrInfo and Error Status with NVIDIA's Xid 144-150 table; "
                            "fatal ones need a GPU reset; follow Xid 154 if one was logged",
    "XID_154": "Follow the recovery action the message names",
    "XID_154_EVAL": "Follow Xid 154 if one was logged, otherwise restart the application",
    "CHECK_UVM": "If UVM or vGPU is in use reset the GPU, otherwise nothing",
    "INVESTIGATE_SW": "Investigate the user or NVIDIA software that made the call (use the PID)",
    "INVESTIGATE_SW_USER": "Investigate the software or user that did this, if unexpected",
    "INVESTIGATE_LINK_SI": "Investigate link signal integrity (GB200 resiliency flow)",
    "SYMPATHETIC": "Secondary error: fix the other errors first; report it if seen alone",
    "XID_137_FLOW": "Debug the application's peer-to-peer access (compute-sanitizer memcheck, "
                    "cuda-gdb); report a bug if inconclusive",
    "INFORMATIONAL": "Informational only: act on the Xid it accompanies",
    "UNUSED": "Not reported by Ampere or newer GPUs; on older GPUs contact support if it repeats",
}
"""The catalog's Fault Resolution Buckets in plain words."""


def _act(bucket: str) -> str:
    return f"{BUCKETS[bucket]} [{bucket}]"


def _x(code: int, name: str, category: Category, severity: Severity, meaning: str,
       now: str, then: str) -> XidInfo:
    return XidInfo(code, name, category, severity, meaning, _act(now), _act(then))


def _legacy(code: int, name: str, category: Category, meaning: str = "") -> XidInfo:
    """A code the catalog lists as unused on Ampere and newer: meaning from the old page."""
    what = meaning or f"{name} (Volta and older GPUs)"
    return XidInfo(code, name, category, WARN, what, _act("CONTACT_SUPPORT"), _act("UNUSED"))


def _unused(code: int, mnemonic: str) -> XidInfo:
    """A code the catalog lists as unused on every GPU, with no older meaning either."""
    return XidInfo(code, f"Unused Xid ({mnemonic})", "other", WARN,
                   f"NVIDIA lists {mnemonic} as unused or reserved", _act("CONTACT_SUPPORT"),
                   _act("UNUSED"))


def _engine(code: int, engine: str, what: str = "Error") -> XidInfo:
    """Copy, video and JPEG engine exceptions: the app restarts, support if it repeats."""
    return _x(code, f"{engine} {what}", "other", WARN,
              f"The {engine} engine raised an exception (hardware or driver); the channel that "
              "used it was stopped", "RESTART_APP", "CONTACT_SUPPORT")


_PUSHBUF = "The GPU received an invalid or corrupted command (push buffer) stream"
_NVLINK5 = ("NVLink5 {unit} error (Blackwell). The message carries the sub-unit, Fatal or "
            "Nonfatal, the link, then IntrInfo and Error Status to decode")

_ROWS: tuple[XidInfo, ...] = (
    _legacy(1, "Invalid or corrupted push buffer stream", "driver"),
    _legacy(2, "Invalid or corrupted push buffer stream", "driver"),
    _legacy(3, "Invalid or corrupted push buffer stream", "driver"),
    _legacy(4, "Invalid or corrupted push buffer stream / GPU semaphore timeout", "driver"),
    _legacy(6, "Invalid or corrupted push buffer stream", "driver"),
    _legacy(7, "Invalid or corrupted push buffer address", "driver"),
    _x(8, "GPU stopped processing", "driver", WARN,
       "A channel stopped making progress and hit the idle timeout (FIFO_ERROR_IDLE_TIMEOUT); "
       "hardware, driver, application or system memory can cause it",
       "RESTART_APP", "CONTACT_SUPPORT"),
    _legacy(9, "Driver error programming GPU", "driver"),
    _x(11, "Invalid or corrupted push buffer stream", "application", WARN,
       f"{_PUSHBUF} (GR_ERROR_MISSING_HW)", "RESTART_APP", "CHECK_APP/CUDA"),
    _legacy(12, "Driver error handling GPU exception", "driver"),
    _x(13, "Graphics Engine Exception", "application", WARN,
       "A general application fault in the graphics/compute engine: usually an out-of-bounds "
       "access, sometimes an illegal instruction or register; rarely hardware or system "
       "software", "RESTART_APP", "WORKFLOW_XID_13"),
    _x(14, "Fake or injected error", "other", INFO,
       "An error injected from user space for testing (ROBUST_CHANNEL_FAKE_ERROR)",
       "IGNORE", "CONTACT_SUPPORT"),
    _legacy(16, "Display engine hung", "other"),
    _legacy(18, "Bus mastering disabled in PCI Config Space", "bus"),
    _legacy(19, "Display Engine error", "other"),
    _legacy(20, "Invalid or corrupted Mpeg push buffer", "driver"),
    _legacy(21, "Invalid or corrupted Motion Estimation push buffer", "driver"),
    _legacy(22, "Invalid or corrupted Video Processor push buffer", "driver"),
    _legacy(24, "GPU semaphore timeout", "driver"),
    _x(25, "Invalid or illegal push buffer stream", "application", WARN,
       f"{_PUSHBUF} (GR_ILLEGAL_NOTIFY)", "RESTART_APP", "CHECK_APP/CUDA"),
    _legacy(26, "Framebuffer timeout", "memory"),
    _legacy(27, "Video processor exception", "other"),
    _legacy(28, "Video processor exception", "other"),
    _legacy(29, "Video processor exception", "other"),
    _legacy(30, "GPU semaphore access error", "driver"),
    _x(31, "GPU memory page fault", "application", WARN,
       "The GPU MMU reported a fault, such as an access to an illegal address; usually an "
       "application bug, sometimes a driver or hardware bug", "RESTART_APP", "WORKFLOW_XID_31"),
    _x(32, "Invalid or corrupted push buffer stream", "bus", WARN,
       "The DMA controller that carries the driver's command stream over PCIe reported a "
       "fault (PBDMA_ERROR); mostly PCIe quality problems, seldom the application",
       "RESTART_APP", "CHECK_APP/CUDA"),
    _legacy(33, "Internal micro-controller error", "driver"),
    _legacy(34, "Video processor exception", "other"),
    _legacy(35, "Video processor exception", "other"),
    _legacy(36, "Video processor exception", "other"),
    _x(37, "Driver firmware error", "driver", WARN,
       "The context-switch firmware (FECS) got a method it does not implement",
       "IGNORE", "CHECK_APP/CUDA"),
    _x(38, "Driver firmware error", "driver", WARN,
       "The context-switch firmware (FECS) watchdog timed out", "IGNORE", "CONTACT_SUPPORT"),
    _engine(39, "CE0", "Copy Engine Exception"),
    _engine(40, "CE1", "Copy Engine Exception"),
    _engine(41, "CE2", "Copy Engine Exception"),
    _legacy(42, "Video processor exception", "other"),
    _x(43, "GPU stopped processing", "application", WARN,
       "An application hit a software-induced fault and had to stop "
       "(RESETCHANNEL_VERIF_ERROR); the GPU stays healthy", "IGNORE", "CONTACT_SUPPORT"),
    _x(44, "Graphics Engine fault during context switch", "driver", WARN,
       "The graphics engine faulted while switching contexts (GR_FAULT_DURING_CTXSW)",
       "IGNORE", "CONTACT_SUPPORT"),
    _x(45, "Preemptive cleanup, due to previous errors", "application", WARN,
       "The driver tore down a GPU application's channels because it was aborted (Ctrl-C, "
       "SIGKILL, GPU reset) or because of an earlier error; look at the Xid before it",
       "WORKFLOW_XID_45", "SYMPATHETIC"),
    _x(46, "GPU stopped processing", "driver", CRIT,
       "The GPU timed out (ROBUST_CHANNEL_GPU_TIMEOUT_ERROR)", "RESET_GPU", "CONTACT_SUPPORT"),
    _legacy(47, "Video processor exception", "other"),
    _x(48, "Double Bit ECC Error", "memory", CRIT,
       "An uncorrectable (double-bit) ECC error in GPU memory or SRAM; the application is "
       "told, and a GPU reset or node reboot is needed to clear it",
       "WORKFLOW_XID_48", "WORKFLOW_XID_48"),
    _x(54, "Auxiliary power is not connected to the GPU board", "thermal-power", WARN,
       "The board runs on reduced clocks because its auxiliary power is missing",
       "CHECK_MECHANICALS", "CONTACT_SUPPORT"),
    _legacy(56, "Display Engine error", "other",
            "Display engine error, hardware or driver (Volta and older GPUs)"),
    _legacy(57, "Error programming video memory interface", "memory",
            "Video memory interface link training failed: hardware, driver or framebuffer "
            "corruption (Volta and older GPUs)"),
    _legacy(58, "Unstable video memory interface detected", "memory",
            "Unstable video memory interface or EDC error, hardware or driver (Volta and older "
            "GPUs)"),
    _legacy(59, "Internal micro-controller error (older drivers)", "driver"),
    _x(60, "Video processor exception", "other", WARN,
       "The SEC2 micro-controller raised an exception", "RESTART_APP", "INVESTIGATE_SW"),
    _legacy(61, "Internal micro-controller breakpoint/warning (newer drivers)", "driver"),
    _x(62, "Internal micro-controller halt", "driver", CRIT,
       "The PMU micro-controller halted (PMU_HALT_ERROR): firmware, driver or hardware",
       "RESET_GPU", "CONTACT_SUPPORT"),
    _x(63, "GPU memory remapping event", "memory", WARN,
       "ECC handling recorded a row remap (Ampere and newer) or a retired page (older GPUs); "
       "it takes effect after the next GPU reset", "IGNORE", "IGNORE"),
    _x(64, "GPU memory remapping failure", "memory", CRIT,
       "ECC handling could not record a row remap or page retirement (no spare rows, or the "
       "InfoROM update failed)", "RESET_GPU", "CONTACT_SUPPORT"),
    _legacy(65, "Video processor exception", "other",
            "NVENC1 video encoder exception, hardware or driver (Volta and older GPUs)"),
    _x(66, "Illegal access by driver", "driver", WARN,
       "The context-switch firmware saw a register access violation", "IGNORE",
       "INVESTIGATE_SW"),
    _x(67, "Illegal access by driver", "driver", WARN,
       "The context-switch firmware saw a verification violation", "IGNORE",
       "CONTACT_SUPPORT"),
    _engine(68, "NVDEC0", "Exception"),
    _x(69, "Graphics Engine class error", "application", WARN,
       "The graphics engine got a method for the wrong object class", "RESTART_APP",
       "CHECK_APP/CUDA"),
    _engine(70, "CE3"), _engine(71, "CE4"), _engine(72, "CE5"),
    _legacy(73, "NVENC2 Error", "other"),
    _x(74, "NVLINK Error", "nvlink", CRIT,
       "A connection from this GPU to another GPU or NVSwitch over NVLink failed (A100/H100); "
       "the link, or the device at its far end, may be at fault; a GPU reset or node reboot "
       "is needed to clear it", "WORKFLOW_NVLINK_ERR", "CONTACT_SUPPORT"),
    _engine(75, "CE6"), _engine(76, "CE7"), _engine(77, "CE8"),
    _x(78, "vGPU Start Error", "driver", WARN,
       "A vGPU could not start: guest driver incompatible with the host driver, or a vGPU "
       "type the guest cannot use", "UPDATE_SWFW", "UPDATE_SWFW"),
    _x(79, "GPU has fallen off the bus", "bus", CRIT,
       "The driver could not reach the GPU over PCI Express; usually the PCIe link went down "
       "through a hardware fault, sometimes failing GPU hardware or the driver",
       "RESTART_BM", "CONTACT_SUPPORT"),
    _x(80, "Corrupted data sent to GPU", "bus", WARN,
       "A push buffer arrived with a CRC mismatch (PBDMA_PUSHBUFFER_CRC_MISMATCH)",
       "RESTART_APP", "CHECK_APP/CUDA"),
    _legacy(81, "VGA Subsystem Error", "other"),
    _engine(82, "NVJPG0"), _engine(83, "NVDEC1"), _engine(84, "NVDEC2"), _engine(85, "CE9"),
    _engine(86, "OFA", "Exception"), _engine(88, "NVDEC3"), _engine(89, "NVDEC4"),
    _x(92, "High single-bit ECC error rate", "memory", CRIT,
       "Corrected (single-bit) ECC errors arrive at an excessive rate: memory that is "
       "degrading, the usual forerunner of uncorrectable errors", "IGNORE", "CONTACT_SUPPORT"),
    _x(93, "Non-fatal violation of provisioned InfoROM wear limit", "other", WARN,
       "The driver could not update the InfoROM because of the wear limit set with nvflash "
       "(clear it with nvflash --elsessionclear)", "IGNORE", "CONTACT_SUPPORT"),
    _x(94, "Contained memory error", "memory", WARN,
       "An error (often ECC) contained to one application, which must restart; the others "
       "are unaffected; reset the GPU when convenient", "RESTART_APP", "SYMPATHETIC"),
    _x(95, "Uncontained memory error", "memory", CRIT,
       "An error (often ECC) that affects several applications; the GPU must be reset before "
       "applications can start again", "RESET_GPU", "SYMPATHETIC"),
    _engine(96, "NVDEC5"), _engine(97, "NVDEC6"), _engine(98, "NVDEC7"),
    _engine(99, "NVJPG1"), _engine(100, "NVJPG2"), _engine(101, "NVJPG3"),
    _engine(102, "NVJPG4"), _engine(103, "NVJPG5"), _engine(104, "NVJPG6"),
    _engine(105, "NVJPG7"),
    _x(106, "SMBPBI Test Message", "other", INFO,
       "A test message sent through the out-of-band SMBPBI interface", "IGNORE", "IGNORE"),
    _x(107, "SMBPBI Test Message Silent", "other", INFO,
       "A silent test message sent through the out-of-band SMBPBI interface", "IGNORE",
       "IGNORE"),
    _x(108, "NVLink remote translation error", "nvlink", WARN,
       "A remote translation fault over NVLink (NVLINK_REMOTE_TRANSLATION_ERROR); listed "
       "unused", "IGNORE", "XID_137_FLOW"),
    _x(109, "Context Switch Timeout Error", "driver", CRIT,
       "A context switch timed out; hardware, driver, application, memory, bus, thermal and "
       "framebuffer causes are all possible", "RESET_GPU", "CONTACT_SUPPORT"),
    _x(110, "Security Fault Error", "other", CRIT,
       "A security fault, uncommon without a hardware failure: revert recent hardware changes "
       "and cold-reset the system", "RESET_GPU", "INVESTIGATE_SW"),
    _legacy(111, "Display Bundle Error Event", "other"),
    _legacy(112, "Display Supervisor Error", "other"),
    _legacy(113, "DP Link Training Error", "other"),
    _legacy(114, "Display Pipeline Underflow Error", "other"),
    _legacy(115, "Display Core Channel Error", "other"),
    _legacy(116, "Display Window Channel Error", "other"),
    _legacy(117, "Display Cursor Channel Error", "other"),
    _legacy(118, "Display Pixel Pipeline Error", "other"),
    _x(119, "GSP RPC Timeout", "gsp", CRIT,
       "The GSP firmware core did not answer an RPC from the driver in time; a GPU reset or "
       "node power cycle may be needed if it persists", "RESET_GPU", "INVESTIGATE_SW"),
    _x(120, "GSP Error", "gsp", CRIT,
       "Code running on the GSP firmware core failed; a GPU reset or node power cycle may be "
       "needed if it persists", "RESET_GPU", "INVESTIGATE_SW"),
    _x(121, "C2C Error", "nvlink", INFO,
       "Corrected errors on the C2C NVLink to the Grace CPU (GB200); no operational impact; "
       "a GPU reset at a service window retrains the link", "IGNORE", "CONTACT_SUPPORT"),
    _legacy(122, "SPI PMU RPC Read Failure", "other"),
    _legacy(123, "SPI PMU RPC Write Failure", "other"),
    _legacy(124, "SPI PMU RPC Erase Failure", "other"),
    _legacy(125, "InfoROM FS Failure", "other"),
    *(_engine(c, f"CE{c - 116}") for c in range(126, 136)),
    _x(136, "Link Training Failed", "nvlink", CRIT,
       "NVLink link training failed (ALI_TRAINING_FAIL, H100)", "RESET_GPU",
       "INVESTIGATE_LINK_SI"),
    _x(137, "NVLink Privilege Error", "application", WARN,
       "The remote MMU reported a fault, such as an illegal NVLink peer-to-peer access; "
       "usually an application bug, sometimes a driver or hardware bug", "IGNORE",
       "XID_137_FLOW"),
    _engine(139, "OFA1"),
    _x(140, "ECC Unrecovered Error", "memory", CRIT,
       "Uncorrectable memory errors escaped the driver's ability to offline pages or remap "
       "rows (UNRECOVERABLE_ECC_ERROR_ESCAPE)", "RESET_GPU", "CONTACT_SUPPORT"),
    _x(141, "CUDA Fast Path Error", "driver", WARN,
       "An error on the CUDA fast path (ROBUST_CHANNEL_FAST_PATH_ERROR)", "IGNORE",
       "CONTACT_SUPPORT"),
    _engine(142, "NVENC3"),
    _x(143, "GPU Initialization Error", "driver", CRIT,
       "The GPU failed to initialise (GPU_INIT_ERROR, H100 and newer, driver R575+)",
       "RESET_GPU", "CONTACT_SUPPORT"),
    _x(144, "NVLINK: SAW Error", "nvlink", CRIT, _NVLINK5.format(unit="SAW"),
       "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
    _x(145, "NVLINK: RLW Error", "nvlink", CRIT, _NVLINK5.format(unit="RLW"),
       "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
    _x(146, "NVLINK: TLW Error", "nvlink", CRIT, _NVLINK5.format(unit="TLW"),
       "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
    _x(147, "NVLINK: TREX Error", "nvlink", WARN, _NVLINK5.format(unit="TREX"),
       "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
    _x(148, "NVLINK: NVLPW_CTRL Error", "nvlink", WARN, _NVLINK5.format(unit="NVLPW_CTRL"),
       "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
    _x(149, "NVLINK: NETIR Error", "nvlink", CRIT,
       _NVLINK5.format(unit="NETIR") + "; link-down events are link-fatal and leave the GPU "
       "drain-and-reset recommended", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
    _x(150, "NVLINK: MSE Error", "nvlink", CRIT, _NVLINK5.format(unit="MSE firmware"),
       "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
    _x(151, "Key rotation Error", "other", WARN,
       "Confidential-computing key rotation failed", "RESTART_VM", "CONTACT_SUPPORT"),
    _x(152, "DLA SMMU Error", "other", WARN, "Deep-learning accelerator SMMU error (not on "
       "data-centre GPUs)", "IGNORE", "CONTACT_SUPPORT"),
    _x(153, "DLA timeout Error", "other", WARN, "Deep-learning accelerator timeout (not on "
       "data-centre GPUs)", "IGNORE", "CONTACT_SUPPORT"),
    _x(154, "GPU Recovery Action Changed", "other", WARN,
       "Accompanies other Xids and states the recovery they need: None, Drain P2P, Drain and "
       "Reset, GPU Reset Required or Node Reboot Required", "XID_154", "INFORMATIONAL"),
    _x(155, "NVLINK: SW Defined Error", "nvlink", WARN,
       "An NVLink link went down on purpose (flagged intentional, including sleep)",
       "RESET_GPU", "INVESTIGATE_SW_USER"),
    _x(156, "Resource Retirement Event", "memory", WARN,
       "A hardware resource was retired; it takes effect after a GPU reset", "RESET_GPU",
       "IGNORE"),
    _x(157, "Resource Retirement Failure", "memory", WARN,
       "A resource could not be retired for lack of spares; work can go on but the same Xid "
       "may return", "IGNORE", "CONTACT_SUPPORT"),
    _x(158, "GPU Fatal Timeout", "other", CRIT, "A fatal GPU timeout", "RESET_GPU",
       "CONTACT_SUPPORT"),
    _x(159, "CHI Non-Data Error", "nvlink", WARN,
       "A CHI non-data error, seen on GPUs with a C2C link", "CHECK_UVM", "SYMPATHETIC"),
    _x(160, "Channel Retirement Event", "driver", INFO, "A channel was retired", "IGNORE",
       "INVESTIGATE_SW"),
    _x(161, "Channel Retirement Failure", "driver", WARN, "A channel could not be retired",
       "IGNORE", "INVESTIGATE_SW"),
    XidInfo(162, "Power Smoothing HW Circuitry capability reengaged", "thermal-power", INFO,
            "Hardware power smoothing is working again", _act("IGNORE"), _act("IGNORE")),
    XidInfo(163, "Power Smoothing HW Circuitry capability disengaged", "thermal-power", WARN,
            "Hardware power smoothing turned itself off (thermal events or a timeout); no GPU "
            "reset is required",
            "If power smoothing is wanted, resolve the thermal events; after a timeout reload "
            "the driver or reset the GPU", _act("IGNORE")),
    XidInfo(164, "Power Smoothing HW Circuitry low lifetime reached", "thermal-power", WARN,
            "Hardware power smoothing is near the end of its life and will be disabled soon",
            "Monitor power swings; plan to replace the GPU if power smoothing is needed",
            "Decide whether the facility can absorb the power swings"),
    XidInfo(165, "Power Smoothing HW Circuitry lifetime exhausted", "thermal-power", WARN,
            "Hardware power smoothing is used up and disabled; power swings will occur",
            "Replace the GPU if power smoothing is needed",
            "Check that the data-centre power infrastructure absorbs the swings"),
    XidInfo(166, "NVLink secure crypto error", "nvlink", WARN,
            "Confidential-computing traffic arrived before the link was set up for encryption",
            "Confidential-computing mode only: check the CC link configuration",
            _act("CONTACT_SUPPORT")),
    XidInfo(167, "PCIe fatal timeout", "bus", CRIT, "A fatal timeout on the PCIe interface",
            _act("RESET_GPU"), _act("CONTACT_SUPPORT")),
    XidInfo(168, "Reduced GPU memory capacity", "memory", WARN,
            "Errors were found in the write-protected region (WPR); expected only with ECC off",
            "Enable ECC (for row remapping) or boot again with the WPR shifted",
            _act("CONTACT_SUPPORT")),
    XidInfo(169, "Internal micro-controller halt", "driver", CRIT,
            "The SEC2 micro-controller halted", _act("RESET_GPU"), _act("CONTACT_SUPPORT")),
    XidInfo(170, "NVLink secure interrupt", "nvlink", WARN,
            "An NVLink interrupt seen in confidential-computing mode",
            "Confidential-computing mode only: check the CC link configuration",
            _act("CONTACT_SUPPORT")),
    XidInfo(171, "Uncorrectable DRAM error", "memory", CRIT,
            "Details of an Xid 48: the uncorrectable error is in DRAM",
            _act("WORKFLOW_XID_48"), _act("WORKFLOW_XID_48")),
    XidInfo(172, "Uncorrectable SRAM error", "memory", CRIT,
            "Details of an Xid 48: the uncorrectable error is in on-chip SRAM",
            _act("WORKFLOW_XID_48"), _act("WORKFLOW_XID_48")),
)

_UNUSED = (
    _unused(5, "FIFO_ERROR_RUNOUT_OVERFLOW"), _unused(10, "GR_ERROR_SINGLE_STEP"),
    _unused(15, "SCANLINE_TIMEOUT"), _unused(17, "PARAMETER_ERROR"),
    _unused(23, "RC_LOGGING_ENABLED"), _unused(49, "SILENT_RUNNING_CONSTANT_LEVEL_SET"),
    _unused(50, "SILENT_RUNNING_LEVEL_TRANSITION_DUE_TO_RC_ERROR"),
    _unused(51, "SILENT_RUNNING_STRESS_TEST_FAILURE"),
    _unused(52, "SILENT_RUNNING_LEVEL_TRANS_DUE_TO_TEMP_RISE"),
    _unused(53, "SILENT_RUNNING_TEMP_REDUCED_CLOCKING"),
    _unused(55, "SILENT_RUNNING_TEMPERATURE_READ_ERROR"),
    _unused(87, "NVTELEMETRY_DRIVER_REPORT"), _unused(90, "LTC_ERROR"),
    _unused(91, "RESERVED_XID"), _unused(138, "DLA_ERROR"),
)

XID_CATALOG: Mapping[int, XidInfo] = {
    row.code: row for row in sorted((*_ROWS, *_UNUSED), key=lambda r: r.code)}
"""Every Xid the sources name, by code."""


def lookup(code: int) -> XidInfo:
    """The catalog entry for ``code``; a generic warning entry for a code it does not list.

    Args:
        code: the Xid number from an ``NVRM: Xid (…): N, …`` line.

    Returns:
        The entry; never raises, because newer drivers add codes faster than catalogs.
    """
    info = XID_CATALOG.get(code)
    if info is not None:
        return info
    return XidInfo(
        code, f"Xid {code} (not in the catalog)", "other", WARN,
        "A code NVIDIA's public catalog does not list (a newer driver, or a garbled line)",
        "Look the code up in the latest NVIDIA Xid catalog and the driver release notes",
        _act("CONTACT_SUPPORT"))
