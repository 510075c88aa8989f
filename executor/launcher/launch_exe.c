/* ptc-sandbox-launch's entry point: the launcher's program (launch_main.c) as an executable. A
   zygote's child runs the same program from the zygote's library (launch_zygote.c). */
#include "launch.h"

int main(int argc, char **argv)
{
    return launch_main(argc, argv, NULL, -1);
}
