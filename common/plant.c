/* The planted race of common/plant.h: compiled into seedfs_plant only. */
#include "common/plant.h"

#include <pthread.h>

static unsigned long plant_word; /* unprotected, on purpose */

static void *plant_writer(void *arg)
{
	(void)arg;
	plant_word++;
	return NULL;
}

void sfs_tsan_plant(void)
{
	pthread_t t;

	/* This write races with the writer the previous call started: no
	 * lock, no join orders them. */
	plant_word++;
	if (!pthread_create(&t, NULL, plant_writer, NULL))
		pthread_detach(t);
}
