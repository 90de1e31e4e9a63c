// SPDX-License-Identifier: MIT
/*
 * CUDA graphs of a device's stream for the engine's backend (module.h,
 * graph_begin .. graph_free): the ops called between graph_begin and
 * graph_end are recorded, not run, and graph_launch runs them all as one
 * launch. A graph made again for the same ops (a decode step's, at other
 * positions, over other rows' buffers) updates the one made before in
 * place (cudaGraphExecUpdate: the kernels' arguments change, the
 * topology does not), which costs far less than instantiating it anew;
 * where the topology did change, it is instantiated again.
 */
#include "internal.h"

struct cuda_graph {
	cudaGraphExec_t exec;
};

int cuda_graph_begin(struct cuda_dev *d, struct err *err)
{
	/* thread-local: other threads' contexts may allocate meanwhile */
	return cuda_check(cudaStreamBeginCapture(
				  d->stream, cudaStreamCaptureModeThreadLocal),
			  "graph capture", err);
}

/* a new executable graph of g into *out */
static int graph_instantiate(cudaGraph_t g, struct cuda_graph **out,
			     struct err *err)
{
	cuda_graph *n = new cuda_graph();
	int ret = cuda_check(cudaGraphInstantiate(&n->exec, g, 0),
			     "graph instantiate", err);

	if (ret) {
		delete n;
		return ret;
	}
	*out = n;
	return 0;
}

int cuda_graph_end(struct cuda_dev *d, struct cuda_graph **g, bool *updated,
		   struct err *err)
{
	cudaGraph_t cg = nullptr;
	cudaGraphExecUpdateResultInfo info;
	int ret;

	if (updated)
		*updated = false;
	ret = cuda_check(cudaStreamEndCapture(d->stream, &cg), "graph capture",
			 err);
	if (ret || !g) {
		if (cg)
			cudaGraphDestroy(cg);
		return ret;
	}
	if (*g && cudaGraphExecUpdate((*g)->exec, cg, &info) == cudaSuccess) {
		if (updated)
			*updated = true;
	} else {
		/* a failed update is no error: the graph is made again */
		cudaGetLastError();
		cuda_graph_free(*g);
		*g = nullptr;
		ret = graph_instantiate(cg, g, err);
	}
	cudaGraphDestroy(cg);
	return ret;
}

int cuda_graph_launch(struct cuda_dev *d, struct cuda_graph *g, struct err *err)
{
	return cuda_check(cudaGraphLaunch(g->exec, d->stream), "graph launch",
			  err);
}

void cuda_graph_free(struct cuda_graph *g)
{
	if (!g)
		return;
	cudaGraphExecDestroy(g->exec);
	delete g;
}
