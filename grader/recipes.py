"""Dask clusters beyond one machine for grading a class: a Slurm recipe and a Kubernetes worker pod.

Both give grader.cluster.grade_class workers with one GPU each; the host still writes the gradebook
alone, and each task carries its student's notebooks as bytes (no shared folder is needed).

* :func:`slurm_cluster` — dask-jobqueue's SLURMCluster, one job per worker, each job asking for one
  GPU (``--gres=gpu:1``) and running one single-threaded worker; nothing is submitted until it is
  scaled (``cluster.scale(jobs=N)``).
* :func:`worker_pod` — the manifest of one Dask worker pod for Kubernetes: one GPU
  (``nvidia.com/gpu: 1``), and one volume: an empty scratch folder where the task writes the
  submission it grades (no host path, no secret, no service-account token). :func:`worker_deployment`
  wraps it for ``kubectl apply``; :func:`worker_network_policy` lets the pod talk to the scheduler only.

docs/GRADING.md ("A class on a cluster") shows both in use.
"""
from __future__ import annotations

SCRATCH_MOUNT = "/sandbox"          # the pod's one volume: where a task writes the submission it grades


def slurm_cluster(*, queue: str | None = None, account: str | None = None, walltime: str = "02:00:00",
                  cores: int = 8, memory: str = "64GB", python: str | None = None, job_extra: list | None = None,
                  **kwargs):
    """A SLURMCluster whose every job asks for one GPU and runs one single-threaded worker.
    ``cores``/``memory``: the CPU and RAM each job asks for (the judge, its sandbox, nvcc)."""
    from dask_jobqueue import SLURMCluster

    # cores=1: the worker's threads (one task at a time); job_cpu/job_mem: what the job asks Slurm for
    return SLURMCluster(queue=queue, account=account, walltime=walltime, cores=1, processes=1, job_cpu=cores,
                        memory=memory, job_mem=memory, python=python,
                        job_extra_directives=["--gres=gpu:1", *(job_extra or [])], **kwargs)


def worker_pod(image: str, scheduler: str, *, name: str = "grader-worker", cpu: str = "8",
               memory: str = "64Gi", scratch: str = "20Gi") -> dict:
    """A Pod manifest running one Dask worker of ``scheduler`` (tcp://host:8786) on one GPU. The
    image holds the course (pip install '.[cluster]') and bubblewrap; the only volume is the
    submission's scratch (an emptyDir, TMPDIR)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "grader-worker"}},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "containers": [{
                "name": "worker",
                "image": image,
                "args": ["dask", "worker", scheduler, "--nthreads", "1", "--nworkers", "1",
                         "--memory-limit", "0", "--no-dashboard"],
                "env": [{"name": "TMPDIR", "value": SCRATCH_MOUNT},
                        {"name": "GRADER_SANDBOX", "value": "bwrap"}],
                "resources": {"limits": {"nvidia.com/gpu": 1, "cpu": cpu, "memory": memory},
                              "requests": {"nvidia.com/gpu": 1, "cpu": cpu, "memory": memory}},
                "volumeMounts": [{"name": "submission", "mountPath": SCRATCH_MOUNT}],
                "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
            }],
            "volumes": [{"name": "submission", "emptyDir": {"sizeLimit": scratch}}],
        },
    }


def worker_deployment(image: str, scheduler: str, replicas: int, **kwargs) -> dict:
    """``replicas`` worker pods (one GPU each) as a Deployment, for ``kubectl apply -f``."""
    pod = worker_pod(image, scheduler, **kwargs)
    pod["spec"]["restartPolicy"] = "Always"
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": pod["metadata"]["name"]},
            "spec": {"replicas": replicas, "selector": {"matchLabels": pod["metadata"]["labels"]},
                     "template": {"metadata": pod["metadata"], "spec": pod["spec"]}}}


def worker_network_policy(scheduler_labels: dict) -> dict:
    """The workers may reach the scheduler's pods and nothing else; nothing may reach them except it."""
    peer = [{"podSelector": {"matchLabels": scheduler_labels}}]
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "grader-worker-only-scheduler"},
            "spec": {"podSelector": {"matchLabels": {"app": "grader-worker"}},
                     "policyTypes": ["Ingress", "Egress"],
                     "ingress": [{"from": peer}], "egress": [{"to": peer}]}}
