// The blob store the configuration selects: an S3 bucket when PDS_BLOBSTORE_S3_BUCKET is set, the
// disk otherwise. The bucket is the operator's own, so its client skips the outbound-request guard.
import type { Config } from '../config.js'
import { DiskBlobStore, type BlobStore } from './blobstore.js'
import { S3BlobStore } from './blobstore-s3.js'

export function openBlobStore(config: Pick<Config, 'blobDir' | 'blobS3'>): BlobStore {
  return config.blobS3 ? new S3BlobStore(config.blobS3) : new DiskBlobStore(config.blobDir)
}
