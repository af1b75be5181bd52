// com.atproto.sync.subscribeRepos: the firehose, from the durable event log.
import type { Server } from '../../../../generated/server/index.js'
import type { HandlerOutput } from '../../../../generated/server/types/com/atproto/sync/subscribeRepos.js'
import type { Services } from '../../../../context.js'
import { consume } from '../../../../sequencer/consumer.js'

export default (api: Server, { firehose }: Pick<Services, 'firehose'>) =>
  api.com.atproto.sync.subscribeRepos(
    // xrpc-server sends Frame instances as they are: events go out pre-encoded
    ({ params, signal }) => consume(firehose, params.cursor, signal) as AsyncIterable<HandlerOutput>,
  )
