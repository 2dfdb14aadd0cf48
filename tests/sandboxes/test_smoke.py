from portal.sandboxes.models import SandboxState
from portal.sandboxes.services import sandbox_request


def test_slice_request_within_policy_runs(run_jobs, fleet, researcher, slice_request):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    sandbox.refresh_from_db()
    assert sandbox.state == SandboxState.RUNNING
    assert sandbox.node_name == "gpu-h100-b"
