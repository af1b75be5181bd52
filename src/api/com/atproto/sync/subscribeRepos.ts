// com.atproto.sync.subscribeRepos: the firehose, from the durable event log.
import type { Server } from '../../../../generated/server/index.js'
import type { HandlerOutput } from '../../../../generated/server/types/com/atproto/sync/subscribeRepos.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { consume } from '../../../../sequencer/consumer.js'

export default (api: Server, { firehose }: Pick<Services, 'firehose'>) =>
  api.com.atproto.sync.subscribeRepos<AuthFor<'com.atproto.sync.subscribeRepos'>>(
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
