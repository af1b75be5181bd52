// com.atproto.sync.subscribeRepos: the firehose, from the durable event log.
import { method } from '#src/api/method.js'
import type { HandlerOutput } from '#src/generated/server/types/com/atproto/sync/subscribeRepos.js'
import { consume } from '#src/sequencer/consumer.js'

export default method(
  'com.atproto.sync.subscribeRepos',
  ({ firehose }) =>
    // events are written to the socket by the consumer; only error frames that end the stream
    // before it starts are yielded (xrpc-server sends them and closes)
    ({ params, req, signal }) =>
      consume(
        firehose,
        params.cursor,
        signal,
        firehose.admission.socketOf(req),
        firehose.admission.connectionOf(req),
      ) as AsyncIterable<HandlerOutput>,
)
